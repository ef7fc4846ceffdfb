"""A notebook run's result with each line placed in its cell.

The agent runs a notebook's code cells as one module (cells.py), so the profiler, the line
attribution and tracebacks count lines in the joined text. Every record of the result that names
the notebook and a line (the lines table, frames, findings, callers, an error) gets a ``cell``
beside it: the cell's index and id and the line within the cell, which is what the CLI prints and
where the editor and the kernel magic show it.
"""

from __future__ import annotations

from typing import Any

from .cells import Joined


def add_cells(result: dict[str, Any], path: str, joined: Joined) -> None:
    """Adds ``cell`` to every record in ``result`` at ``path`` (the notebook's relative path)."""
    _walk(result, path, joined)


def _walk(value: Any, path: str, joined: Joined) -> None:
    if isinstance(value, list):
        for item in value:
            _walk(item, path, joined)
        return
    if not isinstance(value, dict):
        return
    line = value.get("line")
    if value.get("path") == path and isinstance(line, int) and not isinstance(line, bool):
        located = joined.locate(line)
        if located is not None:
            cell, cell_line = located
            value["cell"] = {"index": cell.index, "id": cell.id, "line": cell_line}
    for key, item in value.items():
        if key != "notebook":
            _walk(item, path, joined)
