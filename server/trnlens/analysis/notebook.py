"""``trnlens check`` on a Jupyter notebook: its code cells analysed as one module (as ruff does),
each finding and each fix edit placed in its cell with the cell's own line numbers.

``--fix`` applies the edits to the cells' sources as written (magics included) and writes the
notebook back as Jupyter does: outputs, metadata and the other cells stay byte-identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from trnlens.agent.notebook import cells
from trnlens.analysis.engine import SYNTAX_CODE, analyse_source
from trnlens.analysis.fixes import apply_edits
from trnlens.analysis.model import CellRef, Edit, Finding, Location

SUFFIX = ".ipynb"


def is_notebook(path: str) -> bool:
    return path.endswith(SUFFIX)


def analyse_notebook(
    text: str,
    path: str,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
) -> list[Finding]:
    """The findings in the notebook file's text, in cell coordinates."""
    try:
        joined = cells.join_notebook(text)
    except cells.NotebookError as exc:
        start = Location(1, 1)
        return [Finding(SYNTAX_CODE, str(exc), start, start, path, severity="error")]
    return [in_cells(f, joined) for f in analyse_source(joined.text, path, select, ignore)]


def in_cells(finding: Finding, joined: cells.Joined) -> Finding:
    """The finding with its rows (location, span, fix edits) counted in its cell."""
    located = joined.locate(finding.location.row)
    if located is None:  # an error about the whole notebook (say, an empty one)
        return finding
    cell, _ = located
    shift = cell.start - 1
    fix = finding.fix
    if fix is not None:
        fix = replace(fix, edits=tuple(_edit_in_cells(e, joined) for e in fix.edits))
    return replace(
        finding,
        location=_shifted(finding.location, shift),
        end_location=_shifted(finding.end_location, shift),
        lines=(finding.lines[0] - shift, finding.lines[1] - shift) if finding.lines else None,
        cell=CellRef(cell.index, cell.id),
        fix=fix,
    )


def _shifted(location: Location, shift: int) -> Location:
    return Location(location.row - shift, location.column)


def _edit_in_cells(edit: Edit, joined: cells.Joined) -> Edit:
    located = joined.locate(edit.location.row)
    if located is None:
        return edit
    cell, _ = located
    shift = cell.start - 1
    return Edit(
        edit.content,
        _shifted(edit.location, shift),
        _shifted(edit.end_location, shift),
        CellRef(cell.index, cell.id),
    )


def fix_notebook(
    text: str,
    path: str,
    select: Sequence[str] | None,
    ignore: Sequence[str] | None,
    rounds: int,
) -> tuple[str, list[Finding], int]:
    """(the fixed notebook text, the findings that remain, the fixes applied): the safe fixes
    applied to their cells' sources, over up to ``rounds`` rounds (overlapping edits wait)."""
    findings = analyse_notebook(text, path, select, ignore)
    fixed = 0
    for _ in range(rounds):
        safe = [f for f in findings if f.fix and f.fix.applicability == "safe"]
        by_cell: dict[int, list[Edit]] = {}
        for f in safe:
            for edit in f.fix.edits:  # type: ignore[union-attr]
                if edit.cell is not None:
                    by_cell.setdefault(edit.cell.index, []).append(edit)
        joined = cells.join_notebook(text)
        sources = {}
        for index, edits in by_cell.items():
            before = joined.cell(index).source
            after = apply_edits(before, edits)
            if after != before:
                sources[index] = after
        if not sources:
            break
        text = cells.replace_sources(text, sources)
        fixed += len(safe)
        findings = analyse_notebook(text, path, select, ignore)
    return text, findings, fixed
