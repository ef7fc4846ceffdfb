"""One profile inside the running kernel: the call's objects as the notebook built them, measured
by the agent's Runner in this process (agent/notebook/live.py), stored in the project's
``.trnlens`` store like any run, so the editor shows it on the notebook's cells.

No IPython here (magics.py parses the magic's line): the shell's cell transformer comes in as a
function, so the kernel's cell files can be matched to the saved notebook's cells.
"""

from __future__ import annotations

import linecache
import os
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trnlens import project
from trnlens.agent import inputs, sources
from trnlens.agent.notebook import cells
from trnlens.agent.notebook.live import CellFile, Live, call_target, cell_text
from trnlens.agent.runner import Runner
from trnlens.store import Store

# The function a ``%%trnlens`` cell's body becomes (its lines are the cell's lines).
CELL_FUNCTION = "trnlens_cell"


class LiveRunError(Exception):
    """What the magic says instead of a result (no traceback: the user's call is not at fault)."""


@dataclass
class RunOptions:
    backend: str = "cpu"
    warmup: int = 3
    steps: int = 5
    repeats: int = 20
    mode: str = "auto"
    notebook: str | None = None  # the .ipynb the kernel runs (else found, see notebook_path)
    extra: dict[str, Any] = field(default_factory=dict)


def notebook_path(namespace: Mapping[str, Any], given: str | None) -> Path | None:
    """The notebook this kernel runs: named in the magic, else as VS Code (``__vsc_ipynb_file__``)
    or Jupyter Server (``JPY_SESSION_NAME``) tell the kernel, else None."""
    told = (namespace.get("__vsc_ipynb_file__"), os.environ.get("JPY_SESSION_NAME"))
    for candidate in (given, *told):
        if isinstance(candidate, str) and candidate.endswith(".ipynb"):
            path = Path(candidate).expanduser().resolve()
            if path.is_file():
                return path
    return None


def kernel_cell_files(
    joined: cells.Joined, relpath: str, transform: Callable[[str], str]
) -> dict[str, CellFile]:
    """The kernel's cell files (linecache entries with no file behind them) whose text is one of
    the notebook's Python cells as the shell transformed it: each mapped to its joined lines."""
    by_text: dict[str, cells.Cell] = {}
    for cell in joined.cells:
        if cell.python:
            by_text.setdefault(transform(cell.source).rstrip(), cell)
    found: dict[str, CellFile] = {}
    for filename, entry in list(linecache.cache.items()):
        if len(entry) != 4 or entry[1] is not None:
            continue
        text = "".join(entry[2])
        match = by_text.get(text.rstrip())
        if match is not None:
            found[filename] = CellFile(text, relpath, match.start - 1)
    return found


def _definition(text: str, qualname: str, cell: cells.Cell | None) -> sources.Definition:
    """The definition of ``qualname`` in ``text``: the one in ``cell`` when a later cell
    redefined it (the kernel runs the last definition executed)."""
    tree = sources.parse(text)
    found = [node for name, node, _ in sources.iter_definitions(tree) if name == qualname]
    if not found:
        raise LiveRunError(f"no definition of {qualname} in its cell")
    inside = [n for n in found if cell is None or cell.contains(n.lineno)]
    node = (inside or found)[-1]
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    kind = "class" if node.__class__.__name__ == "ClassDef" else "function"
    end = node.end_lineno or node.lineno
    return sources.Definition(qualname, kind, node.lineno, start, end, ())


def profile(
    call: tuple[Any, tuple, dict],
    namespace: Mapping[str, Any],
    transform: Callable[[str], str],
    options: RunOptions,
    cell_source: tuple[str, str] | None = None,
) -> dict:
    """Profiles ``func(*args, **kwargs)`` (``call``) in this process and stores the run.

    ``cell_source``: for ``%%trnlens``, (the cell's file name, the function source made of it).
    """
    func, args, kwargs = call
    try:  # the agent's: only it imports torch (the kernel has it; the server never does)
        target, instance, code = call_target(func)
    except TypeError as exc:
        raise LiveRunError(str(exc)) from None
    qualname = target.__qualname__
    own_text = cell_text(code.co_filename)
    if own_text is None:
        raise LiveRunError(f"the source of {qualname} is not known to this kernel")
    path = notebook_path(namespace, options.notebook)
    root = project.find_root(path if path is not None else Path.cwd())
    cell_files = {code.co_filename: CellFile(own_text)}
    joined = None
    relpath = code.co_filename
    text, in_cell = own_text, None
    if path is not None:
        relpath = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        joined = cells.join_notebook(path.read_text("utf-8"))
        cell_files.update(kernel_cell_files(joined, relpath, transform))
        if cell_source is not None:
            _add_magic_cell(cell_files, joined, relpath, cell_source)
        own = cell_files[code.co_filename]
        if own.notebook is not None and cell_source is None:
            text = joined.text  # the definition as the editor and `trnlens profile` see it
            located = joined.locate(own.offset + 1)
            in_cell = located[0] if located else None
        elif own.notebook is None:
            joined = None  # the cell is not in the saved notebook (unsaved?): its own text
            relpath = code.co_filename
    module = types.ModuleType("__main__")
    module.__dict__.update(namespace)
    definition = _definition(text, qualname, in_cell)
    made = inputs.Inputs(tuple(args), dict(kwargs), instance=instance)
    store = Store(root)
    try:
        fields = {
            "backend": options.backend,
            "warmup": options.warmup,
            "steps": options.steps,
            "repeats": options.repeats,
            "mode": options.mode,
            "project_root": str(root),
            "variants": [{"path": relpath, "qualname": qualname}],
            "artifacts_dir": str(store.staging_dir()),
            "context": {"target": "kernel"},
            **options.extra,
        }
        live = Live(module, target, made, text, definition, cell_files, joined)
        result = Runner(fields, lambda _: None, lambda: False, live=live).run()
        result.pop("_output", None)
        store.add(result)
    finally:
        store.close()
    return result


def _add_magic_cell(
    cell_files: dict[str, CellFile], joined: cells.Joined, relpath: str, cell: tuple[str, str]
) -> None:
    """A ``%%trnlens`` cell: its body's function file maps to the notebook cell holding it."""
    filename, body = cell
    for candidate in joined.cells:
        lines = cells.split_lines(candidate.source)
        if lines and lines[0].lstrip().startswith("%%trnlens"):
            if "\n".join(lines[1:]).rstrip() == body.rstrip():
                text = cell_files[filename].text
                cell_files[filename] = CellFile(text, relpath, candidate.start - 1)
                return


def cell_function(body: str, filename: str, namespace: dict[str, Any]) -> Callable[[], Any]:
    """A ``%%trnlens`` cell's body as a function of no arguments, compiled under ``filename``
    with the cell's own line numbers (the magic's line is line 1, the ``def``)."""
    indented = "".join(f"    {line}\n" if line.strip() else "\n" for line in body.split("\n"))
    source = f"def {CELL_FUNCTION}():\n{indented}"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    scope: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace, scope)  # the user's own cell, on request
    return scope[CELL_FUNCTION]
