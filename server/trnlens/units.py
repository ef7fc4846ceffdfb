"""Figures as people read them (times, counts, shapes): one formatter for the editor, the terminal
and the report alike."""

from __future__ import annotations


def duration(us: float | None) -> str:
    """Microseconds scaled to a readable unit with three significant figures: 0.70 ms, 1.84 s."""
    if us is None:
        return "–"
    if us < 0:  # a change: the sign, then the magnitude in its own unit (not -50108538 ns)
        return "-" + duration(-us)
    if us < 1:
        return f"{us * 1000:.0f} ns"
    if us < 1000:
        return f"{_sig(us)} µs"
    if us < 1_000_000:
        return f"{_sig(us / 1000)} ms"
    return f"{_sig(us / 1_000_000)} s"


def _sig(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def signed_pct(pct: float) -> str:
    """``+68%``, ``−55%``, ``±0%``: a change in whole percent, with a real minus sign."""
    value = round(pct)
    return "±0%" if value == 0 else f"+{value}%" if value > 0 else f"−{-value}%"


def count(n: float | None, noun: str) -> str:
    n = int(round(n or 0))
    return f"{n} {noun}" if n == 1 else f"{n} {noun}es" if noun.endswith("ch") else f"{n} {noun}s"


def shapes(input_shapes: list | None, limit: int = 2) -> str:
    """A short text for an op's input shapes: ``[4, 512, 2048] · [2048]`` (first calls only)."""
    if not input_shapes:
        return ""
    calls = []
    for call in input_shapes[:limit]:
        tensors = [str(list(s)) for s in call if isinstance(s, list) and s]
        calls.append(", ".join(tensors))
    text = " · ".join(c for c in calls if c)
    return text + (" …" if len(input_shapes) > limit else "")


def data_size(n: float | None) -> str:
    """Bytes in decimal units: 512 B, 1.1 MB."""
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)
