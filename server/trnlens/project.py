"""The project a file belongs to: its root (where `.trnlens/` lives) and its git commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

MARKERS = (".trnlens", "pyproject.toml", ".git", "setup.py", "setup.cfg")


def find_root(path: str | Path) -> Path:
    """The nearest directory above ``path`` holding a project marker, else the file's directory."""
    start = Path(path).resolve()
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        if any((candidate / marker).exists() for marker in MARKERS):
            return candidate
    return directory


def git_commit(root: str | Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"],
            capture_output=True, text=True, timeout=5, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None
