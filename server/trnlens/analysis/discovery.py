"""Which files ``trnlens check PATH...`` looks at."""

from __future__ import annotations

import os
from collections.abc import Iterable

# Never worth analysing: version control, environments, caches, our own store.
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".trnlens",
        ".ipynb_checkpoints",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        "site-packages",
        "build",
        "dist",
    }
)


def _is_venv(path: str) -> bool:
    return os.path.exists(os.path.join(path, "pyvenv.cfg"))


def python_files(paths: Iterable[str]) -> list[str]:
    """Every ``*.py`` and ``*.ipynb`` (Jupyter notebook, as ruff) under the given files and
    directories, sorted, each once.

    A path named explicitly is always taken, even a non-``.py`` file; a missing path raises
    ``FileNotFoundError``.
    """
    found: dict[str, None] = {}
    for path in paths:
        if os.path.isfile(path):
            found[os.path.normpath(path)] = None
        elif os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(
                    d
                    for d in dirs
                    if d not in SKIP_DIRS
                    and not d.endswith(".egg-info")
                    and not _is_venv(os.path.join(root, d))
                )
                for name in sorted(files):
                    if name.endswith((".py", ".ipynb")):
                        found[os.path.normpath(os.path.join(root, name))] = None
        else:
            raise FileNotFoundError(path)
    return list(found)
