"""Which open files are outside the project, and so read-only to trnlens.

An installed library (``site-packages``, ``dist-packages``, a virtual environment) or the
standard library is not the user's code: an edit there changes every project that uses it and is
lost on the next install. Such a file gets no edit quick fixes and no Profile or Compare lenses,
as Pylance and rust-analyzer leave library files alone; what a run measured there is still shown
(hints, and each measured finding once, pointing to the project-side fix).
"""

from __future__ import annotations

import re
import sysconfig
from collections.abc import Iterable
from pathlib import Path

ENVIRONMENT_DIRS = frozenset({"site-packages", "dist-packages", ".venv", "venv", ".tox", ".nox"})
# lib/python3.12/... : a Python installation's standard library (any interpreter's, not only
# the one running the server)
_STDLIB_PART = re.compile(r"^python\d+(\.\d+)?t?$")


def _stdlib_dirs() -> tuple[Path, ...]:
    found = []
    for key in ("stdlib", "platstdlib"):
        value = sysconfig.get_paths().get(key)
        if value:
            found.append(Path(value).resolve())
    return tuple(found)


_STDLIB = _stdlib_dirs()


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def outside_project(path: Path, root: Path, workspace_folders: Iterable[Path] = ()) -> bool:
    """True for a file of an installed package, a virtual environment or a standard library,
    and for a file outside every workspace folder (when the editor named any)."""
    resolved = path.resolve()
    parts = resolved.parts
    if ENVIRONMENT_DIRS.intersection(parts):
        return True
    if any(parts[i] in ("lib", "lib64") and _STDLIB_PART.match(parts[i + 1])
           for i in range(len(parts) - 1)):  # fmt: skip
        return True
    if any(_inside(resolved, stdlib) for stdlib in _STDLIB):
        return True
    folders = [Path(f).resolve() for f in workspace_folders]
    return bool(folders) and not any(_inside(resolved, f) for f in folders)
