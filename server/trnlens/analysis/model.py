"""The finding model: what a rule reports, in the shape of ruff's JSON output.

Rows and columns are 1-based, columns counted in characters (code points), like ruff. LSP wants
0-based positions: :meth:`Location.to_lsp` gives them (in code points; the language server's
position codec turns them into UTF-16 units where a line holds characters outside the BMP).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, order=True)
class Location:
    row: int  # 1-based line
    column: int  # 1-based character column

    def to_lsp(self) -> dict[str, int]:
        return {"line": self.row - 1, "character": self.column - 1}

    def to_json(self) -> dict[str, int]:
        return {"row": self.row, "column": self.column}


@dataclass(frozen=True)
class CellRef:
    """Where a finding or an edit in a notebook sits: its cell (rows are then the cell's own)."""

    index: int  # among all the notebook's cells, 0-based (as nbformat and VS Code count)
    id: str  # the nbformat cell id; "" for a notebook older than cell ids

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.id}


@dataclass(frozen=True)
class Edit:
    """Replace the text between ``location`` and ``end_location`` (end exclusive) by ``content``."""

    content: str
    location: Location
    end_location: Location
    cell: CellRef | None = None  # in a notebook: the cell the rows count in

    def to_json(self) -> dict[str, Any]:
        found = {
            "content": self.content,
            "location": self.location.to_json(),
            "end_location": self.end_location.to_json(),
        }
        if self.cell is not None:
            found["cell"] = self.cell.to_json()
        return found


@dataclass(frozen=True)
class Fix:
    message: str
    edits: tuple[Edit, ...]
    # "safe": numerically equivalent and applied by `trnlens check --fix`; "unsafe": shown, never
    # applied automatically (same meaning as ruff's).
    applicability: str = "safe"

    def to_json(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "applicability": self.applicability,
            "edits": [e.to_json() for e in self.edits],
        }


# Every static finding's message ends with this: what it says is counted from the code. The
# language server replaces it by the figures once a run measured the finding's lines.
NOT_TIMED = " (static: not measured)"


@dataclass
class Finding:
    code: str
    message: str
    location: Location
    end_location: Location
    filename: str = ""
    # "error": unparsable source; "warning": a costly pattern with a proven (safe) fix; "info": a
    # hazard not measured (a sync in a loop, a pattern without a fix); "hint": a sync the code
    # needs. The language server raises info/hint a level when a run measured the lines costly.
    severity: str = "warning"
    qualname: str | None = None  # enclosing function: "func" or "Class.method"; None at top level
    fix: Fix | None = None
    # The enclosing function with the fix applied, dedented, defining the same name: the profiling
    # agent execs it in a copy of the module's globals to measure the fix beside the original.
    variant_source: str | None = None
    naive_dispatches: int | None = None  # tensor ops in the matched pattern (from its AST)
    lines: tuple[int, int] | None = None  # first and last line the pattern spans
    # In a notebook: the cell (rows, ``lines`` and the fix's edits then count in their cells).
    cell: CellRef | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def start(self) -> Location:
        return self.location

    @property
    def end(self) -> Location:
        return self.end_location

    def lsp_range(self) -> dict[str, dict[str, int]]:
        return {"start": self.location.to_lsp(), "end": self.end_location.to_lsp()}

    def to_json(self) -> dict[str, Any]:
        """One entry of ruff's ``--output-format json`` list, plus trnlens' own keys (and, in a
        notebook, ``cell``: its index and id)."""
        found = {
            "filename": self.filename,
            "code": self.code,
            "message": self.message,
            "location": self.location.to_json(),
            "end_location": self.end_location.to_json(),
            "fix": self.fix.to_json() if self.fix else None,
            "severity": self.severity,
            "qualname": self.qualname,
            "naive_dispatches": self.naive_dispatches,
            "lines": list(self.lines) if self.lines else None,
            "variant_source": self.variant_source,
        }
        if self.cell is not None:
            found["cell"] = self.cell.to_json()
        return found
