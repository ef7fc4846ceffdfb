"""Inlay hints at the end of each line that took time in the last run of its function.

``38% · 0.70 ms · 2 dispatches``: the line's share of the run's attributed time, its time per
step and its dispatches; `` · stale`` once the function's source no longer matches the run.
Lines with nothing measured get none.
"""

from __future__ import annotations

from lsprotocol import types

from trnlens.lsp import format
from trnlens.lsp.documents import ProfiledDocument


def line_label(entry: dict, total_us: float) -> str:
    time_us = entry.get("device_us") or 0
    parts = []
    if total_us > 0:
        parts.append(f"{100 * time_us / total_us:.0f}%")
    parts.append(format.duration(time_us))
    if entry.get("dispatches"):
        parts.append(format.count(entry["dispatches"], "dispatch"))
    if entry.get("label"):  # the backward training mode adds, on the def line
        parts.append(entry["label"])
    return " · ".join(parts)


def utf16_length(text: str) -> int:
    """LSP columns count UTF-16 code units (the default position encoding)."""
    return len(text.encode("utf-16-le")) // 2


def inlay_hints(doc: ProfiledDocument, range_: types.Range) -> list[types.InlayHint]:
    lines = doc.text.splitlines()
    hints = []
    for line, entry, placement in doc.line_figures():
        if not (range_.start.line <= line <= range_.end.line) or line >= len(lines):
            continue
        if not (entry.get("device_us") or entry.get("dispatches")):
            continue
        label = line_label(entry, placement.line_total())
        if doc.is_stale(placement):
            label += " · stale"
        hints.append(
            types.InlayHint(
                position=types.Position(line, utf16_length(lines[line])),
                label=label,
                padding_left=True,
                tooltip=f"{placement.result.qualname}: {placement.result.part_label} time "
                f"per step, from run {placement.result.run_id}",
            )
        )
    hints.sort(key=lambda h: h.position.line)
    return hints
