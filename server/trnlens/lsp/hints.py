"""Inlay hints at the end of each line that took time in the last run of its function.

``38% · 0.70 ms · 2 dispatches``: the line's share of the run's attributed time, its time per
step and its dispatches; `` · stale`` once the function's source no longer matches the run. A
training step's forward line says how much of that is the backward of the autograd nodes its
ops made (``64% · 41 ms · 444 dispatches · backward 58%``: schema 4, agent/backward/), and the
tooltip gives its dispatches and time.
Lines with nothing measured get none. A line measured by several runs (a helper two profiled
functions call) gets one hint naming each run's function.
"""

from __future__ import annotations

from lsprotocol import types

from trnlens import rankfigures
from trnlens.headline import headline as run_headline
from trnlens.lsp import format
from trnlens.lsp.documents import Placement, ProfiledDocument

GAP = "  "  # editors render a hint's leading spaces (VS Code as non-breaking ones)


def line_label(entry: dict, total_us: float) -> str:
    time_us = entry.get("device_us") or 0
    parts = []
    if total_us > 0:
        parts.append(f"{100 * time_us / total_us:.0f}%")
    parts.append(format.duration(time_us))
    if entry.get("dispatches"):
        parts.append(format.count(entry["dispatches"], "dispatch"))
    backward = entry.get("backward") or {}
    if backward.get("dispatches"):
        parts.extend(format.backward_share(time_us, backward.get("device_us") or 0))
    if entry.get("label"):  # the backward training mode adds, on the def line
        parts.append(entry["label"])
    return " · ".join(parts)


def backward_tip(entry: dict) -> str:
    """The tooltip's line for a line's backward part ("" when it has none)."""
    backward = entry.get("backward") or {}
    if not backward.get("dispatches"):
        return ""
    return (
        f"; of that, backward: {format.count(backward['dispatches'], 'dispatch')}, "
        f"{format.duration(backward.get('device_us') or 0)} (the autograd engine's work for the "
        "nodes this line's forward ops made; on a backward() line, what no forward op made)"
    )


def utf16_length(text: str) -> int:
    """LSP columns count UTF-16 code units (the default position encoding)."""
    return len(text.encode("utf-16-le")) // 2


def inlay_hints(doc: ProfiledDocument, range_: types.Range) -> list[types.InlayHint]:
    lines = doc.text.splitlines()
    by_line: dict[int, list[tuple[dict, Placement]]] = {}
    for line, entry, placement in doc.line_figures():
        if not (range_.start.line <= line <= range_.end.line) or line >= len(lines):
            continue
        if not (entry.get("device_us") or entry.get("dispatches")):
            continue
        by_line.setdefault(line, []).append((entry, placement))
    hints = []
    for line, measured in sorted(by_line.items()):
        labels, tips = [], []
        for entry, placement in measured:
            label = line_label(entry, placement.line_total())
            if doc.is_stale(placement):
                label += " · stale"
            result = placement.result
            # a multi-rank run's lines are rank 0's figures (the lens shows the slowest rank's)
            rank = "r0 " if rankfigures.is_multi_rank(result.data) else ""
            label = f"{rank}{label}"
            if len(measured) > 1:  # a line several profiled functions ran: say whose figures
                label = f"{result.qualname}: {label}"
            labels.append(label)
            whose = " of rank 0" if rank else ""
            tips.append(
                f"{result.qualname}: {result.part_label} time per step{whose}, of the run's "
                f"{run_headline(result.data).text}, from run {result.run_id}" + backward_tip(entry)
            )
        hints.append(
            types.InlayHint(
                position=types.Position(line, utf16_length(lines[line])),
                # One hint per line, and a visible gap before it: the editor's padding alone
                # left "weight100%" on a long line. Several runs share it, each named.
                label=GAP + " │ ".join(labels),
                padding_left=True,
                tooltip="\n".join(tips),
            )
        )
    return hints
