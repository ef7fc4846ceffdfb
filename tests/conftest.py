"""Fixtures every test folder may use."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def make_project(tmp_path: Path):
    """Writes {relative path: source} under a fresh project root and returns the root."""

    def make(files: dict[str, str]) -> Path:
        for relative, text in files.items():
            path = tmp_path / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return tmp_path

    return make


def python_without_trnlens(directory: Path, with_torch: bool = True) -> Path:
    """A venv that sees torch (through a .pth to our site-packages) but not trnlens.

    Paths a .pth file adds are not site directories, so the editable install's own .pth in our
    site-packages is not processed there: `import trnlens` fails, `import torch` works.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True)
    python = directory / "bin" / "python"
    if with_torch:
        site = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        Path(site, "torch-only.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python
