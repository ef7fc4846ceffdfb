"""Inlay hints at the end of each line that took time in the last run of its function.

``38% · 0.70 ms · 2 dispatches``: the line's share of the run's attributed time, its time per
step and its dispatches; `` · stale`` once the function's source no longer matches the run. A
training step's forward line says how much of that is the backward of the autograd nodes its
ops made (``64% · 41 ms · 444 dispatches · backward 58%``: schema 4, agent/backward/), and the
tooltip gives its dispatches and time.
Lines with nothing measured get none. A line measured by several runs (a helper two profiled
functions call) gets one hint naming each run's function.

Every hint fits VS Code's default ``editor.inlayHints.maximumLength`` (43 characters for all the
hints of a line together: beyond it the editor cuts the label with "…" and drops the line's
later hints). Each kind of hint gives its labels richest first (:class:`Labelled`);
:func:`fitted` takes, line by line, the richest that fit together, the hint of highest priority
kept richest, and puts what a label left out in its tooltip; ``stale`` is said once a line. A
line's hint keeps its share and time (its key figures) and ``stale``; it drops, in this order,
the def line's mode label, the backward share (first said ``bwd 58%``) and the dispatches.
"""

from __future__ import annotations

import itertools
import re
from typing import NamedTuple

from lsprotocol import types

from trnlens import rankfigures
from trnlens.headline import headline as run_headline
from trnlens.lsp import format
from trnlens.lsp.documents import Placement, ProfiledDocument
from trnlens.results import Result

GAP = "  "  # editors render a hint's leading spaces (VS Code as non-breaking ones)
STALE = " · stale"  # the run measured other code than the buffer's
HINT_CHARS = rankfigures.HINT_CHARS  # editor.inlayHints.maximumLength's default, per line


class Labelled(NamedTuple):
    """A hint and the labels it may show, richest first (``hint.label`` is set by
    :func:`fitted`); of a line's hints, those of higher ``priority`` keep richer labels."""

    hint: types.InlayHint
    labels: list[str]
    priority: int = 0


def fitted(found: list[Labelled], limit: int = HINT_CHARS) -> list[types.InlayHint]:
    """The hints, each line's within ``limit`` UTF-16 units in all (as VS Code counts them).

    The hints of a line are ranked by ``priority`` (then their order in ``found``): the first
    keeps its richest label that leaves room for the others' shortest, and so on down; only
    when even the shortest labels do not fit together are the last hints left out (their words
    go to the tooltip of the line's first hint). A label shorter than its richest has that in
    its tooltip. The hints come back in the order of ``found``, line by line.
    """
    by_line: dict[int, list[Labelled]] = {}
    for each in found:
        by_line.setdefault(each.hint.position.line, []).append(each)
    out = []
    for line in sorted(by_line):
        shown = by_line[line]
        ranked = sorted(shown, key=lambda each: -each.priority)
        options = [each.labels for each in ranked]
        if sum(all(label.endswith(STALE) for label in labels) for labels in options) > 1:
            # "stale" once a line: on the hint the line keeps first
            options = [options[0]] + [
                [label.removesuffix(STALE) for label in labels] for labels in options[1:]
            ]
        chosen = dict(zip(map(id, ranked), _choose(options, limit), strict=True))
        dropped = [each for each in ranked if chosen[id(each)] is None]
        kept = [each.hint for each in shown if chosen[id(each)] is not None]
        for each in shown:
            label, richest = chosen[id(each)], each.labels[0]
            if label is not None:
                each.hint.label = label
                if label not in (
                    richest,
                    richest.removesuffix(STALE),
                ):  # what the label left out: in its tooltip
                    each.hint.tooltip = f"{richest.strip()}\n\n{_tip(each.hint)}".strip()
        for each in dropped:  # no room: said in the tooltip of the line's first hint
            kept[
                0
            ].tooltip = f"{_tip(kept[0])}\n\n{each.labels[0].strip()}\n{_tip(each.hint)}".strip()
        out.extend(kept)
    return out


def _tip(hint: types.InlayHint) -> str:
    tooltip = hint.tooltip
    return tooltip if isinstance(tooltip, str) else tooltip.value if tooltip else ""


def _choose(options: list[list[str]], limit: int) -> list[str | None]:
    """One label per hint (None: left out), the first hints richest (see :func:`fitted`)."""
    for kept in range(len(options), 0, -1):
        # product varies the last hint fastest: the first is kept richest
        for combo in itertools.product(*options[:kept]):
            if sum(width(label) for label in combo) <= limit:
                return [*combo, *[None] * (len(options) - kept)]
    return [options[0][-1], *[None] * (len(options) - 1)]  # cut by the editor: the shortest


def width(text: str) -> int:
    """What VS Code counts of a label: its UTF-16 code units."""
    return utf16_length(text)


def dropping(parts: list[str], keep: int, suffix: str = "") -> list[str]:
    """``parts`` joined with `` · ``, richest first: all of them, then ``backward 58%`` said
    ``bwd 58%``, then without the last part, down to the first ``keep``; ``suffix``
    (`` · stale``) on each."""
    keep = max(1, min(keep, len(parts)))
    short = [BACKWARD.sub("bwd ", part) for part in parts]
    found = [" · ".join(parts) + suffix]
    for n in range(len(parts), keep - 1, -1):
        label = " · ".join(short[:n]) + suffix
        if label != found[-1]:
            found.append(label)
    return found


BACKWARD = re.compile(r"^backward (?=\d)")


def line_parts(entry: dict, total_us: float) -> list[str]:
    """A measured line's figures, most telling first: share, time, dispatches, backward share,
    the def line's mode label."""
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
    return parts


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


def time_words(result: Result) -> str:
    """What a line's time is: ``CPU (ops) time per step``, or its ``share of the unprofiled
    time per step`` when the lines were put on the unprofiled median (agent/basis.py)."""
    label = result.part_label
    if label == "unprofiled share":
        return "share of the unprofiled time per step"
    return f"{label} time per step"


def utf16_length(text: str) -> int:
    """LSP columns count UTF-16 code units (the default position encoding)."""
    return len(text.encode("utf-16-le")) // 2


def inlay_hints(doc: ProfiledDocument, range_: types.Range) -> list[types.InlayHint]:
    return fitted(labelled(doc, range_))


def labelled(doc: ProfiledDocument, range_: types.Range) -> list[Labelled]:
    lines = doc.text.splitlines()
    by_line: dict[int, list[tuple[dict, Placement]]] = {}
    for line, entry, placement in doc.line_figures():
        if not (range_.start.line <= line <= range_.end.line) or line >= len(lines):
            continue
        if not (entry.get("device_us") or entry.get("dispatches")):
            continue
        by_line.setdefault(line, []).append((entry, placement))
    found = []
    for line, measured in sorted(by_line.items()):
        options, named, bare, tips = [], [], [], []
        for entry, placement in measured:
            total = placement.line_total()
            stale = STALE if doc.is_stale(placement) else ""
            result = placement.result
            # a multi-rank run's lines are rank 0's figures (the lens shows the slowest rank's)
            rank = "r0 " if rankfigures.is_multi_rank(result.data) else ""
            name = f"{result.qualname}: " if len(measured) > 1 else ""  # say whose figures
            keep = 2 if total > 0 else 1  # share and time: the key figures
            parts = line_parts(entry, total)
            options.append([f"{name}{rank}{label}" for label in dropping(parts, keep, stale)])
            named.append(f"{name}{rank}{parts[0]}{stale}")
            bare.append(f"{rank}{parts[0]}{stale}")
            whose = " of rank 0" if rank else ""
            tips.append(
                f"{result.qualname}: {time_words(result)}{whose}, of the run's "
                f"{run_headline(result.data).text}, from run {result.run_id}" + backward_tip(entry)
            )
        labels = [
            GAP + " │ ".join(each[min(level, len(each) - 1)] for each in options)
            for level in range(max(len(each) for each in options))
        ]
        if len(options) > 1:  # several runs: their shares, then without their names
            labels += [GAP + " │ ".join(named), GAP + " │ ".join(bare)]
        found.append(
            Labelled(
                types.InlayHint(
                    position=types.Position(line, utf16_length(lines[line])),
                    # One hint per line, and a visible gap before it: the editor's padding
                    # alone left "weight100%" on a long line. Several runs share it, each named.
                    label=labels[0],
                    padding_left=True,
                    tooltip="\n".join(tips),
                ),
                labels,
            )
        )
    return found
