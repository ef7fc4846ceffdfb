"""`trnlens compare`: the three RMSNorm samples side by side."""

from __future__ import annotations

import json

import jsonschema
from trnlens.cli.render import render_comparison
from trnlens.results import schema

from tests.cli.conftest import trnlens


def test_compare_naive_fused_and_compiled(samples):
    done = trnlens(
        "compare", "samples/rmsnorm.py::rmsnorm_naive", "samples/rmsnorm.py::rmsnorm_fused",
        "--compiled", "--warmup", "2", "--steps", "2", "--repeats", "5", "--format", "json",
        cwd=samples,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    jsonschema.validate(outcome, schema())
    assert [v["dispatches_per_step"] for v in outcome["variants"]] == [6, 1, 1]
    assert [v["variant"]["kind"] for v in outcome["variants"]] == [
        "function", "function", "compiled",
    ]  # fmt: skip
    assert outcome["speedups"][0] == 1.0
    assert all(d is not None and d < 1e-4 for d in outcome["max_abs_diff"])
    # The compiled variant says what torch.compile made of it; the others were not compiled.
    assert [("compile" in v) for v in outcome["variants"]] == [False, False, True]
    compiled = outcome["variants"][2]["compile"]
    assert compiled["graphs_per_call"] == 1 and compiled["breaks"] == []
    assert "rmsnorm_naive (compiled): 1 graph per call  ·  compile " in render_comparison(outcome)


def test_compare_table(samples):
    done = trnlens(
        "compare", "samples/rmsnorm.py::rmsnorm_naive", "samples/rmsnorm.py::rmsnorm_fused",
        "--warmup", "1", "--steps", "2", "--repeats", "3", cwd=samples,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "rmsnorm_naive (baseline)" in done.stdout
    assert "1.00x" in done.stdout
    assert "Speed-up" in done.stdout


def test_compare_needs_two(samples):
    assert trnlens("compare", "samples/rmsnorm.py::rmsnorm_naive", cwd=samples).returncode == 2
