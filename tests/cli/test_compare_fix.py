"""`trnlens compare --fix`: the original, the analysis' fix and the compiled original in one run."""

from __future__ import annotations

import json

import jsonschema
from trnlens.results import schema

from tests.cli.conftest import trnlens


def test_compare_fix_runs_original_fixed_and_compiled(samples):
    done = trnlens(
        "compare", "--fix", "samples/rmsnorm.py::rmsnorm_naive",
        "--warmup", "1", "--steps", "2", "--repeats", "3", "--format", "json", "--quiet",
        cwd=samples,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    jsonschema.validate(outcome, schema())
    variants = outcome["variants"]
    assert [v["variant"]["kind"] for v in variants] == ["function", "source", "compiled"]
    assert [v["variant"]["label"] for v in variants] == [
        "rmsnorm_naive", "rmsnorm_naive (fixed: TRN001)", "rmsnorm_naive (compiled)",
    ]  # fmt: skip
    # The fix keeps `* weight` outside torch.rms_norm (dtype-preserving), hence 2 dispatches.
    assert [v["dispatches_per_step"] for v in variants] == [6, 2, 1]
    assert outcome["speedups"][0] == 1.0 and all(outcome["speedups"])
    assert all(low <= high for low, high in outcome["speedup_ranges"])
    assert all(d is not None and d < 1e-4 for d in outcome["max_abs_diff"])


def test_compare_fix_without_a_fix_is_a_usage_error(samples):
    done = trnlens("compare", "--fix", "samples/rmsnorm.py::rmsnorm_fused", cwd=samples)
    assert done.returncode == 2
    assert "the analysis has no fix for rmsnorm_fused in samples/rmsnorm.py" in done.stderr
    assert trnlens("compare", "--fix", "samples/missing.py::f", cwd=samples).returncode == 2
    assert not (samples / ".trnlens").exists()  # refused before anything ran
