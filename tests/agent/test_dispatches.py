"""Dispatches per step, measured with real torch on the CPU (docs/design.md facts, reproduced)."""

from __future__ import annotations

import pytest

from tests.agent.conftest import run

RMSNORM = """
import torch


def inputs():
    return (torch.randn(4, 64, 256), torch.randn(256))


# trnlens: inputs=inputs
def naive(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


# trnlens: inputs=inputs
def fused(x, w, eps=1e-6):
    return torch.rms_norm(x, (x.shape[-1],), w, eps)


# trnlens: inputs=inputs
@torch.compile
def compiled(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


# trnlens: inputs=inputs
@torch.compile
def with_graph_break(x, w, eps=1e-6):
    v = x.pow(2).mean(-1, keepdim=True)
    torch._dynamo.graph_break()
    return x * torch.rsqrt(v + eps) * w
"""


@pytest.fixture
def rms_root(make_project):
    return make_project({"rms.py": RMSNORM})


def profile(root, qualname):
    result = run(root, [{"path": "rms.py", "qualname": qualname}])
    assert result["error"] is None, result["error"]
    return result


def test_naive_rmsnorm_is_six_dispatches(rms_root):
    result = profile(rms_root, "naive")
    assert result["dispatches_per_step"] == 6
    top = {op["name"] for op in result["ops"]}
    assert {"aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul"} <= top


def test_fused_rmsnorm_is_one_dispatch(rms_root):
    result = profile(rms_root, "fused")
    assert result["dispatches_per_step"] == 1
    # The fused op's internals (pow, mean... inside _fused_rms_norm on the CPU) are not dispatches.
    assert any(op["name"] == "aten::rms_norm" for op in result["ops"])


@pytest.mark.slow
def test_compiled_rmsnorm_is_one_dispatch(rms_root):
    result = profile(rms_root, "compiled")
    assert result["dispatches_per_step"] == 1
    assert result["variant"]["kind"] == "function"
    assert any("compiled" in w for w in result["warnings"])  # no per-line figures inside


@pytest.mark.slow
def test_graph_break_counts_two_graphs(rms_root):
    result = profile(rms_root, "with_graph_break")
    assert result["dispatches_per_step"] == 2


def test_figures_are_per_step_and_cpu_based(rms_root):
    result = profile(rms_root, "naive")
    assert result["time_basis"] == "cpu"
    assert result["backend"] == "cpu"
    assert result["steps"] == 2
    assert 0 < result["device_time_per_step_us"] <= result["cpu_time_per_step_us"] * 1.5
    timing = result["timing"]
    assert timing["min_us"] <= timing["median_us"] <= timing["max_us"]
    assert timing["repeats"] == 3
    # The ops table is per step: two muls per call whatever the number of steps.
    mul = next(op for op in result["ops"] if op["name"] == "aten::mul")
    assert mul["calls"] == 2
