"""A notebook's code cells joined into one Python module, as ruff reads a notebook.

Each Python code cell contributes its lines in notebook order, so line ``n`` of the joined text
is line ``n - start + 1`` of exactly one cell. IPython syntax that is not Python (line magics
``%time f()``, shell lines ``!pip ...``, help ``obj?``, cell magics ``%%bash``) is blanked in
place rather than removed: line numbers stay the cell's own, and an indented magic becomes
``pass`` so the block around it still parses. A cell whose cell magic runs its body as Python
(``%%time``, ``%%capture``, ``%%trnlens``...) keeps its body; any other cell magic, and markdown,
raw or non-Python cells, contribute blank lines only (they are never run or analysed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Cell magics whose body IPython runs as Python code in the user namespace.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "trnlens", "debug"})

_MAGIC_ASSIGNMENT = re.compile(r"^\s*[\w.,\s\[\]()*]+=\s*[%!]")
_HELP = re.compile(r"^\s*[\w.]+\?{1,2}\s*$|^\s*\?{1,2}[\w.]+\s*$")


class NotebookError(ValueError):
    """The file is not a notebook this module can read (not JSON, no cell list)."""


@dataclass(frozen=True)
class Cell:
    index: int  # position among all the notebook's cells (0-based, as nbformat and VS Code count)
    id: str  # the nbformat 4.5 cell id (or the editor's cell URI); "" when there is none
    start: int  # 1-based line of the cell's first line in the joined text
    count: int  # lines the cell occupies there
    source: str  # the cell's text as written (magics included)
    python: bool  # whether its lines are Python (False: blanked: markdown, %%bash...)

    def contains(self, line: int) -> bool:
        return self.start <= line < self.start + self.count


@dataclass(frozen=True)
class Joined:
    text: str  # the module: every cell's lines, IPython syntax blanked
    cells: tuple[Cell, ...]

    def locate(self, line: int) -> tuple[Cell, int] | None:
        """(cell, 1-based line within it) for a 1-based line of the joined text."""
        for cell in self.cells:
            if cell.contains(line):
                return cell, line - cell.start + 1
        return None

    def line_of(self, index: int, cell_line: int) -> int:
        """The joined text's line for line ``cell_line`` (1-based) of cell ``index``."""
        for cell in self.cells:
            if cell.index == index:
                return cell.start + cell_line - 1
        raise KeyError(f"no cell {index}")

    def to_map(self) -> list[dict[str, Any]]:
        """The Python cells' places in the joined text, as a result carries them (``notebook``)."""
        return [
            {"index": c.index, "id": c.id, "start": c.start, "count": c.count}
            for c in self.cells
            if c.python
        ]

    @classmethod
    def from_map(cls, cells: Iterable[Mapping[str, Any]]) -> Joined:
        """The line map of ``to_map`` (no text: enough to place lines in cells)."""
        made = [Cell(c["index"], c.get("id") or "", c["start"], c["count"], "", True)
                for c in cells]  # fmt: skip
        return cls("", tuple(made))

    def cell(self, index: int) -> Cell:
        for cell in self.cells:
            if cell.index == index:
                return cell
        raise KeyError(f"no cell {index}")


def cell_label(index: int) -> str:
    """``cell 4`` for the cell at index 3: people count cells from 1, as VS Code's status bar
    ("Cell 4 of 6") and ruff's output do. Data keeps the 0-based index (nbformat's list, VS
    Code's API); only the words for people add one."""
    return f"cell {index + 1}"


def cell_index(label_number: int) -> int:
    """The 0-based index of the cell that ``cell N`` names (``cell_label``'s inverse)."""
    return label_number - 1


def split_lines(source: str) -> list[str]:
    """A cell's lines without their line ends ("a\\nb\\n" and "a\\nb" are both two lines)."""
    lines = source.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _blank(line: str) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    return f"{indent}pass" if indent else ""


def _is_magic(line: str) -> bool:
    stripped = line.lstrip()
    return (
        stripped.startswith(("%", "!"))
        or bool(_MAGIC_ASSIGNMENT.match(line))
        or bool(_HELP.match(line))
    )


def python_lines(source: str) -> tuple[list[str], bool]:
    """The cell's lines with IPython syntax blanked, and whether the cell is Python at all."""
    lines = split_lines(source)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        name = lines[first].lstrip()[2:].split(maxsplit=1)
        if not name or name[0] not in PYTHON_CELL_MAGICS:
            return [""] * len(lines), False
        lines = [*lines[:first], "", *lines[first + 1 :]]
    out: list[str] = []
    continued = False  # a magic line ending in a backslash goes on on the next line
    for line in lines:
        if continued:
            out.append("")  # blank: a parser skips it whatever its indentation
        elif _is_magic(line):
            out.append(_blank(line))
        else:
            out.append(line)
            continue
        continued = line.rstrip().endswith("\\")
    return out, True


def join(cells: Iterable[tuple[int, str, str, bool]]) -> Joined:
    """Joins ``(index, id, source, is_python_code)`` cells in order into one module's text."""
    parts: list[str] = []
    made: list[Cell] = []
    line = 1
    for index, cell_id, source, is_code in cells:
        if is_code:
            lines, python = python_lines(source)
        else:
            lines, python = [""] * len(split_lines(source)), False
        made.append(Cell(index, cell_id, line, len(lines), source, python))
        parts.extend(f"{text}\n" for text in lines)
        line += len(lines)
    return Joined("".join(parts), tuple(made))


def read(text: str) -> dict[str, Any]:
    """A notebook's JSON (nbformat 4) as a dict; a clear error when it is not one."""
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not a notebook: invalid JSON ({exc})") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise NotebookError("not a notebook: no list of cells (only nbformat 4 is read)")
    return notebook


def cell_source(cell: Mapping[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def is_python_notebook(notebook: Mapping[str, Any]) -> bool:
    """Whether the notebook's kernel language is Python (a notebook that names none is)."""
    metadata = notebook.get("metadata") or {}
    language = (metadata.get("kernelspec") or {}).get("language") or (
        metadata.get("language_info") or {}
    ).get("name")
    return language in (None, "python", "python3")


def _is_python_cell(cell: Mapping[str, Any], python_kernel: bool) -> bool:
    if cell.get("cell_type") != "code":
        return False
    # VS Code records a code cell in another language (SQL, shell...) in the cell's metadata.
    language = ((cell.get("metadata") or {}).get("vscode") or {}).get("languageId")
    return language == "python" if language else python_kernel


def join_notebook(text: str) -> Joined:
    """The notebook file's Python code cells as one module (see ``join``)."""
    notebook = read(text)
    python_kernel = is_python_notebook(notebook)
    return join(
        (i, str(cell.get("id") or ""), cell_source(cell), _is_python_cell(cell, python_kernel))
        for i, cell in enumerate(notebook["cells"])
        if isinstance(cell, dict)
    )


def dumps(notebook: Mapping[str, Any]) -> str:
    """A notebook's JSON as Jupyter writes it (nbformat's writer: one-space indent, non-ASCII kept,
    a final newline; keys in the order read, which is Jupyter's sorted order for its own files)."""
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def replace_sources(text: str, sources: Mapping[int, str]) -> str:
    """The notebook file's text with the given cells' sources replaced (index -> new source).
    Nothing else changes: outputs, metadata and the other cells are written back as they were
    read, and a source kept as a list of lines (Jupyter's way) stays one."""
    notebook = read(text)
    for index, source in sources.items():
        cell = notebook["cells"][index]
        if isinstance(cell.get("source"), list):
            cell["source"] = source.splitlines(keepends=True)
        else:
            cell["source"] = source
    return dumps(notebook)
