"""The CLI folds the editor's layers: defaults < [tool.trnlens] in pyproject.toml < its flags."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from trnlens import settings
from trnlens.cli import build_parser
from trnlens.cli.common import run_settings

from tests.cli.conftest import trnlens

PYPROJECT = """\
[project]
name = "demo"

[tool.trnlens]
warmup = 1
steps = 2
repeats = 3
mode = "inference"
timeout_seconds = 120
"""

CODE = "import torch\n\n\ndef f(x=torch.ones(4, 8)):\n    return x.relu() + 1\n"


def _args(*flags: str):
    return build_parser("profile").parse_args(["profile", "m.py::f", *flags])


def _project(tmp_path: Path, pyproject: str = PYPROJECT) -> Path:
    (tmp_path / "pyproject.toml").write_text(pyproject)
    (tmp_path / "m.py").write_text(CODE)
    return tmp_path


def test_pyproject_sets_what_the_flags_leave_out(tmp_path):
    chosen = run_settings(_args(), _project(tmp_path))
    assert (chosen.warmup, chosen.steps, chosen.repeats) == (1, 2, 3)
    assert chosen.mode == "inference" and chosen.timeout_seconds == 120
    assert chosen.origins["steps"] == "pyproject.toml"


def test_flags_win_over_pyproject(tmp_path):
    chosen = run_settings(_args("--steps", "4", "--mode", "training"), _project(tmp_path))
    assert chosen.steps == 4 and chosen.mode == "training" and chosen.warmup == 1
    assert chosen.origins["steps"] == "command line"


def test_without_pyproject_the_defaults_apply(tmp_path):
    chosen = run_settings(_args(), tmp_path)
    assert chosen.steps == settings.DEFAULTS["steps"]
    assert chosen.warmup == settings.DEFAULTS["warmup"]
    assert chosen.origins["steps"] == "defaults"


def test_a_bad_pyproject_value_is_a_usage_error_naming_its_source(tmp_path):
    _project(tmp_path, "[tool.trnlens]\nsteps = 0\n")
    done = trnlens("profile", "m.py::f", cwd=tmp_path)
    assert done.returncode == 2
    assert "trnlens.steps (from pyproject.toml) must be at least 1" in done.stderr


def test_a_run_honours_pyproject_steps_warmup_and_mode(tmp_path):
    done = trnlens("profile", "m.py::f", "--format", "json", cwd=_project(tmp_path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["warmup"], result["steps"], result["mode"]) == (1, 2, "inference")
    assert result["timing"]["repeats"] == 3


@pytest.mark.slow
def test_a_run_honours_pyproject_timeout(tmp_path):
    _project(
        tmp_path,
        PYPROJECT.replace("timeout_seconds = 120", "timeout_seconds = 3"),
    )
    (tmp_path / "m.py").write_text(
        textwrap.dedent(
            """
            import time

            import torch


            def f(x=torch.ones(4)):
                time.sleep(600)
            """
        )
    )
    done = trnlens("profile", "m.py::f", cwd=tmp_path)
    assert (
        done.returncode == 3
    )  # a timeout is the code not finishing (issue 22), not the environment
    assert "longer than 3 s and was stopped" in done.stderr
