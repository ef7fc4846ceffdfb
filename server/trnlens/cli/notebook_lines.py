"""A notebook run shown with cell-relative lines: ``nb.ipynb:cell 3:4`` (cells counted from 1,
``cells.cell_label``) where the result says
``nb.ipynb:13`` (the joined cells' line) and, beside it, the cell (agent/notebook/places.py)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from trnlens.agent.notebook import cells

_CELL_PATH = re.compile(r"^(?P<path>.*\.ipynb):cell (?P<number>\d+)$")


def in_cells(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of the result for display: each record placed in a cell names the cell in its path
    and counts its line in the cell. The function's own record keeps the notebook's path."""
    if "notebook" not in data:
        return data
    shown = copy.deepcopy(data)
    for key, value in shown.items():
        if key != "function":
            _walk(value)
    return shown


def _walk(value: Any) -> None:
    if isinstance(value, list):
        for item in value:
            _walk(item)
        return
    if not isinstance(value, dict):
        return
    cell = value.get("cell")
    if isinstance(cell, dict) and isinstance(value.get("path"), str) and "line" in cell:
        value["path"] = f"{value['path']}:{cells.cell_label(cell['index'])}"
        value["line"] = cell["line"]
    for item in value.values():
        _walk(item)


def cell_source_line(root: Path, path: str, line: int) -> str | None:
    """The text of line ``line`` of the cell that ``path`` (``nb.ipynb:cell 3``) names; None
    when ``path`` names no cell."""
    match = _CELL_PATH.match(path)
    if match is None:
        return None
    try:
        notebook = cells.read((root / match["path"]).read_text("utf-8"))
        index = cells.cell_index(int(match["number"]))
        if index < 0:
            return ""
        source = cells.cell_source(notebook["cells"][index])
        return cells.split_lines(source)[line - 1]
    except (OSError, UnicodeDecodeError, cells.NotebookError, IndexError, json.JSONDecodeError):
        return ""
