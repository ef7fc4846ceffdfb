"""Helpers for the notebook tests: tests name a cell by its id and a line by its text."""

from __future__ import annotations

import json
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "rmsnorm_notebook.ipynb"


def cell_line(path: Path, cell_id: str, needle: str) -> tuple[int, int]:
    """(cell index, 1-based line in the cell) of the first line of the cell holding ``needle``."""
    for index, cell in enumerate(json.loads(path.read_text("utf-8"))["cells"]):
        if cell.get("id") == cell_id:
            for number, line in enumerate("".join(cell["source"]).split("\n"), start=1):
                if needle in line:
                    return index, number
    raise AssertionError(f"{needle!r} not in cell {cell_id}")
