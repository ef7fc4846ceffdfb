"""A timeout names its phase and the line the code was stuck at; bad numbers are usage errors."""

from __future__ import annotations

import pytest
from trnlens.cli import exitcodes

from .conftest import trnlens

SPIN = """
import torch


def spin(x=torch.ones(2)):
    while True:
        x = x + 0
"""


def test_a_timeout_names_the_phase_and_the_stuck_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "loop.py").write_text(SPIN)
    # The deadline is the run's own --timeout: generous enough for a cold torch import here.
    done = trnlens("profile", "loop.py::spin", "--timeout", "30", "--quiet", cwd=tmp_path)
    assert done.returncode == exitcodes.USER_CODE_FAILED, done.stderr
    assert "environment" not in done.stderr and "Neuron" not in done.stderr
    assert "the run took longer than 30 s and was stopped in phase 'warm-up'" in done.stderr
    assert any(f"at loop.py:{n}" in done.stderr for n in (6, 7)), done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("profile", "m.py::f", "--timeout", "-3"),
        ("profile", "m.py::f", "--timeout", "0"),
        ("profile", "m.py::f", "--timeout", "nan"),
        ("profile", "m.py::f", "--steps", "0"),
        ("profile", "m.py::f", "--repeats", "-1"),
        ("profile", "m.py::f", "--warmup", "-1"),
        ("compare", "m.py::f", "m.py::f", "--steps", "1.5"),
        ("profile", "m.py::f", "--warm", "-10"),
        ("history", "m.py::f", "--limit", "0"),
        ("history", "m.py::f", "--threshold", "-5"),
        ("diff", "a", "b", "--fail-above", "-1"),
    ],
)
def test_non_positive_counts_and_durations_are_usage_errors(tmp_path, args):
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    done = trnlens(*args, cwd=tmp_path)
    assert done.returncode == exitcodes.USAGE, done.stderr
    flag = args[-2]
    assert f"argument {flag}: must be" in done.stderr and repr(args[-1]) in done.stderr
