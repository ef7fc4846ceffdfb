"""After a multi-rank run: a hint at the end of each collective's line with each rank's wait,
and the ranks' figures in the function's hover.

``all_reduce: wait r0 2.1 ms · r1 0 ns (in it: 4.9 ms, 3.9 ms per step)``: the wait is the time a
rank spent in the call beyond the fastest rank's (waiting for the others), medians per step.
"""

from __future__ import annotations

from lsprotocol import types

from trnlens import rankfigures
from trnlens.lsp import format, markdown
from trnlens.lsp.documents import ProfiledDocument
from trnlens.lsp.hints import STALE, Labelled, fitted, utf16_length


def inlay_hints(doc: ProfiledDocument, range_: types.Range) -> list[types.InlayHint]:
    return fitted(labelled(doc, range_))


def labelled(doc: ProfiledDocument, range_: types.Range) -> list[Labelled]:
    lines = doc.text.splitlines()
    found = []
    for placement in doc.placements.values():
        result = placement.result
        if result.error or not rankfigures.is_multi_rank(result.data):
            continue
        for row in result.data.get("collectives") or []:
            if row.get("path") != doc.relpath or not row.get("line"):
                continue
            line = placement.now(row["line"] - 1)
            if (
                line is None
                or line >= len(lines)
                or not range_.start.line <= line <= range_.end.line
            ):
                continue
            stale = STALE if doc.is_stale(placement) else ""
            # within VS Code's default hint length (hints.fitted); every rank's figures in the
            # tooltip
            labels = rankfigures.collective_labels(row, stale)
            what = rankfigures.moved(row)  # DDP's buckets, FSDP2's modules: in the tooltip
            hint = types.InlayHint(
                position=types.Position(line, utf16_length(lines[line])),
                label=labels[0],
                padding_left=True,
                tooltip=f"{rankfigures.collective_hint(row)}{stale}\n\n"
                f"{result.qualname} on {result.data.get('world_size')} ranks: time "
                "in this collective per step, and the part spent waiting for the other ranks "
                f"(beyond the fastest rank's), from run {result.run_id}"
                + (f"; it moved {what}" if what else ""),
            )
            found.append(Labelled(hint, labels, priority=2))  # a rank's wait must be seen
    return found


def hover_lines(result) -> list[str]:
    """The function's hover after a multi-rank run: every rank's figures, the slowest marked."""
    data = result.data
    if not rankfigures.is_multi_rank(data):
        return []
    d = format.duration
    rows = [
        "",
        f"**{markdown.text(rankfigures.headline(data))}** (the ops above are rank 0's; each "
        "rank's median step by wall time, so busy = wall − waiting)",
        "",
        "| rank | wall | busy | in collectives | waiting |",
        "|---|---:|---:|---:|---:|",
    ]
    slowest = data.get("slowest_rank")
    for row in data["ranks"]:
        mark = " ◀ slowest" if row["rank"] == slowest else ""
        rows.append(
            f"| {row['rank']}{mark} | {d(row.get('wall_time_per_step_us'))}"
            f" | {d(row.get('busy_time_per_step_us'))}"
            f" | {d(row.get('collective_time_per_step_us'))}"
            f" | {d(row.get('collective_wait_per_step_us'))} |"
        )
    return rows
