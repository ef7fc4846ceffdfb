"""A run inside a running Jupyter kernel: the objects the notebook already built, measured by the
same Runner as every other run, with no import of the user's code.

The kernel compiled each cell under a file name of its own (``/tmp/ipykernel_<pid>/<hash>.py``,
its text in linecache, not on disk). Those files count as the project's here, so the line
attribution sees the cells' lines; afterwards each record at such a file moves to the notebook's
path and its joined line (cells.py), when the cell's text is found in the saved notebook.
"""

from __future__ import annotations

import inspect
import linecache
import os
import types
from dataclasses import dataclass, field
from typing import Any

from .. import inputs, loader, sources
from .cells import Joined


@dataclass
class CellFile:
    """A kernel cell file: the text the kernel ran, and where the cell sits in the notebook."""

    text: str
    notebook: str | None = None  # the notebook's project-relative path, when the cell is in it
    offset: int = 0  # joined line = cell line + offset


@dataclass
class Live:
    """What the Runner measures in place of an imported function (runner.py reads it)."""

    module: types.ModuleType  # the kernel's namespace seen as a module
    target: Any  # the function, or the nn.Module's class (``made.instance`` is the module)
    made: inputs.Inputs
    text: str  # the source the definition is in: the notebook's joined cells, or the cell's text
    definition: sources.Definition
    cell_files: dict[str, CellFile] = field(default_factory=dict)
    notebook: Joined | None = None  # the saved notebook's cells, when the target is in one


class LiveProject(loader.Project):
    """The project, plus the kernel's cell files as its own (their text from linecache)."""

    def __init__(self, root: str, cell_files: dict[str, CellFile]):
        super().__init__(root=root)
        self.cell_files = cell_files

    def is_project_file(self, filename: str) -> bool:
        return filename in self.cell_files or super().is_project_file(filename)

    def relpath(self, filename: str) -> str:
        return filename if filename in self.cell_files else super().relpath(filename)

    def read(self, path: str) -> str:
        cell = self.cell_files.get(os.path.abspath(path))
        return cell.text if cell is not None else super().read(path)


def call_target(obj: Any) -> tuple[Any, Any, types.CodeType]:
    """(what the Runner calls the target, the instance or None, the code the definition is in)
    for an object a cell built: an ``nn.Module`` instance or a function. TypeError otherwise."""
    import torch

    if isinstance(obj, torch.nn.Module):
        forward = inspect.unwrap(type(obj).forward)
        return type(obj), obj, forward.__code__
    function = inspect.unwrap(obj)
    code = getattr(function, "__code__", None)
    if code is None:
        raise TypeError(f"{obj!r} is neither a function nor an nn.Module: nothing to profile")
    return obj, None, code


def cell_text(filename: str) -> str | None:
    """The text the kernel ran under ``filename`` (IPython keeps it in linecache)."""
    lines = linecache.getlines(filename)
    return "".join(lines) if lines else None


def to_notebook(result: Any, cell_files: dict[str, CellFile]) -> None:
    """Moves every record at a kernel cell file to the notebook's path and joined line."""
    if isinstance(result, list):
        for item in result:
            to_notebook(item, cell_files)
        return
    if not isinstance(result, dict):
        return
    path = result.get("path")
    cell = cell_files.get(path) if isinstance(path, str) else None
    if cell is not None and cell.notebook is not None and isinstance(result.get("line"), int):
        result["path"] = cell.notebook
        result["line"] += cell.offset
    for value in result.values():
        to_notebook(value, cell_files)
