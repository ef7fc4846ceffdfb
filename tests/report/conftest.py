"""Real runs to report on: one profile and one three-way comparison (naive, fixed, compiled) of
the RMSNorm sample, made once per session in a temp project by the real CLI and agent."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, trnlens

FAST = ("--warmup", "1", "--steps", "2", "--repeats", "3", "--quiet", "--format", "json")


@dataclass
class Runs:
    root: Path
    profile: dict  # the profile's result
    comparison: dict  # the comparison's outcome


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> Runs:
    root = tmp_path_factory.mktemp("report-project")
    shutil.copytree(REPO / "samples", root / "samples")
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    done = trnlens("profile", "samples/rmsnorm.py::rmsnorm_naive", *FAST, cwd=root)
    assert done.returncode == 0, done.stderr
    profile = json.loads(done.stdout)
    done = trnlens("compare", "--fix", "samples/rmsnorm.py::rmsnorm_naive", *FAST, cwd=root)
    assert done.returncode == 0, done.stderr
    comparison = json.loads(done.stdout)
    return Runs(root, profile, comparison)
