from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def samples(tmp_path) -> Path:
    """A copy of samples/ in a project of its own, so runs land in a temp .trnlens/."""
    shutil.copytree(REPO / "samples", tmp_path / "samples")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    return tmp_path


def trnlens(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trnlens", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
