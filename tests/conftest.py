"""Fixtures every test folder may use."""

from __future__ import annotations

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
