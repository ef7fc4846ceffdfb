"""Times as people read them: one formatter for the editor and the terminal alike."""

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
