"""The project code a run executed, as hashes the editor can recompute from the current text.

A run measured more than its function: the helpers it called, the module-level code that built
the model and the inputs (run at import). Its result knows which project files it imported and
which of their lines ran (the measured lines, the project frames, the lines that called library
code). For each such file this records

- ``module``: the hash of the file's code outside functions (imports, the model built at module
  level, class bodies without their methods): what ran when the file was imported;
- ``defs``: each function holding an executed line, by qualname, with its ``source_hash``.

The editor (``lsp/documents.py``) marks the run stale when any of these differs from what the
project holds now, so an edit outside the profiled function that changes what it ran counts,
and an edit of a function the run never entered does not. Both sides hash with
:func:`module_hash` and ``sources.source_hash``: one implementation, no drift.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable

from .. import sources


def module_hash(text: str, function_spans: Iterable[tuple[int, int]]) -> str:
    """sha256 of ``text``'s lines outside the given functions (1-based inclusive spans, first
    decorator to last line), blank and comment-only lines and trailing whitespace ignored."""
    inside: set[int] = set()
    for start, end in function_spans:
        inside.update(range(start, end + 1))
    kept = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if number in inside or not stripped or stripped.startswith("#"):
            continue
        kept.append(line.rstrip())
    return "sha256:" + hashlib.sha256("\n".join(kept).encode("utf-8")).hexdigest()


def file_fingerprint(text: str, lines: Iterable[int]) -> dict | None:
    """``{"module", "defs"}`` of one file's text and its executed 1-based ``lines``; None when
    the text does not parse."""
    try:
        tree = sources.parse(text)
    except (SyntaxError, ValueError):
        return None
    functions = sources.functions(tree)
    spans = [(d.start_line, d.end_line) for d in functions]
    defs = {}
    for line in set(lines):
        holding = [d for d in functions if d.start_line <= line <= d.end_line]
        if holding:  # the innermost: the one that starts last
            innermost = max(holding, key=lambda d: d.start_line)
            defs[innermost.qualname] = sources.source_hash(text, innermost)
    return {"module": module_hash(text, spans), "defs": dict(sorted(defs.items()))}


def executed_lines(result: dict) -> dict[str, set[int]]:
    """Project-relative path -> 1-based lines the result says ran there."""
    found: dict[str, set[int]] = {}

    def add(path: object, line: object) -> None:
        if isinstance(path, str) and isinstance(line, int) and line > 0:
            found.setdefault(path, set()).add(line)

    for entry in result.get("lines") or []:
        add(entry.get("path"), entry.get("line"))
    for frame in result.get("frames") or []:
        if frame.get("project"):
            add(frame.get("path"), frame.get("line"))
        for caller in frame.get("callers") or []:
            add(caller.get("path"), caller.get("line"))
    for module in result.get("modules") or []:
        caller = module.get("caller") or {}
        add(caller.get("path"), caller.get("line"))
    function = result.get("function") or {}
    add(function.get("path"), function.get("line"))
    return found


def imported_project_files(project) -> set[str]:
    """Absolute paths of the project files imported in this process (their module-level code
    ran)."""
    found = set()
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if filename and project.is_project_file(filename):
            found.add(os.path.abspath(filename))
    return found


def fingerprint(result: dict, project) -> dict[str, dict]:
    """Per project-relative path, the file's :func:`file_fingerprint` for what the run
    executed (``project``: the agent's ``loader.Project``)."""
    lines = executed_lines(result)
    paths = {project.relpath(path) for path in imported_project_files(project)}
    paths.update(p for p in lines if not os.path.isabs(p) and not p.startswith("<"))
    found = {}
    for relpath in sorted(paths):
        try:
            text = project.read(os.path.join(project.root, relpath))
        except (OSError, UnicodeDecodeError):
            continue
        entry = file_fingerprint(text, lines.get(relpath, ()))
        if entry is not None:
            found[relpath] = entry
    return found
