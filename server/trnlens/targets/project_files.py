"""Which project files a remote run needs: the profiled files and the project modules they import.

Found statically (``ast``, no execution): ``import a.b``, ``from a.b import c`` (``c`` may be a
submodule) and relative imports are resolved against the file's package root and the project
root; every package's ``__init__.py`` along the way comes too. Imports that resolve outside the
project (torch, the standard library) are the host's business. Dynamic imports are not seen: for
those, point the target's ``remote_root`` at a checkout on the host.
"""

from __future__ import annotations

import ast
from pathlib import Path

from trnlens.agent.notebook.cells import join_notebook

MAX_FILES = 2000


def _module_file(base: Path, dotted: str) -> Path | None:
    parts = dotted.split(".")
    candidate = base.joinpath(*parts)
    if candidate.with_suffix(".py").is_file():
        return candidate.with_suffix(".py")
    if (candidate / "__init__.py").is_file():
        return candidate / "__init__.py"
    return None


def _package_of(path: Path, root: Path) -> tuple[Path, list[str]]:
    """(the directory above the top package, the package parts) of a module file."""
    directory = path.parent
    parts: list[str] = []
    while (directory / "__init__.py").is_file() and directory != root.parent:
        parts.insert(0, directory.name)
        directory = directory.parent
    return directory, parts


def _imports(path: Path, text: str, root: Path) -> set[Path]:
    try:
        if path.suffix == ".ipynb":  # a notebook's imports are in its code cells
            text = join_notebook(text).text
        tree = ast.parse(text, filename=str(path))
    except (SyntaxError, ValueError):  # NotebookError is a ValueError
        return set()  # the agent reports the syntax error with its line
    top, package_parts = _package_of(path, root)  # an __init__.py belongs to its own package
    bases = [top, root, path.parent]
    found: set[Path] = set()

    def add(dotted: str, bases_: list[Path]) -> None:
        for base in bases_:
            file = _module_file(base, dotted)
            if file is not None:
                found.add(file)
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                for i in range(1, len(parts) + 1):
                    add(".".join(parts[:i]), bases)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package_parts):
                    continue  # beyond the top package: Python would refuse it too
                anchor = package_parts[: len(package_parts) - (node.level - 1)]
                base_parts = anchor + (node.module.split(".") if node.module else [])
                for i in range(1, len(base_parts) + 1):
                    add(".".join(base_parts[:i]), [top])
                for alias in node.names:
                    add(".".join([*base_parts, alias.name]), [top])
            elif node.module:
                parts = node.module.split(".")
                for i in range(1, len(parts) + 1):
                    add(".".join(parts[:i]), bases)
                for alias in node.names:
                    add(f"{node.module}.{alias.name}", bases)
    return found


def needed_files(root: Path, entry_points: list[Path], buffers: dict[Path, str]) -> list[Path]:
    """The project files (under ``root``) the entry points need, entry points included."""
    root = root.resolve()
    seen: set[Path] = set()
    queue = [p.resolve() for p in entry_points]
    while queue and len(seen) < MAX_FILES:
        path = queue.pop()
        if path in seen or not path.is_relative_to(root):
            continue
        seen.add(path)
        directory = path.parent
        while directory != root and (directory / "__init__.py").is_file():
            queue.append(directory / "__init__.py")
            directory = directory.parent
        text = buffers.get(path)
        if text is None:
            try:
                text = path.read_text("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
        queue.extend(p.resolve() for p in _imports(path, text, root))
    return sorted(seen)
