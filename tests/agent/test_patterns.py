"""Pattern checks over real CPU runs: each pattern at the line that dispatched it, and none on the
samples (no false alarm)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.agent.conftest import line_of, run

REPO = Path(__file__).resolve().parents[2]

PATTERNS = """
import torch
from torch import nn


def train_inputs():
    # Big enough that the step is compute-bound on a busy machine too: the launch-bound check
    # must not fire here (a (8, 3, 16, 16) batch was 43 dispatches of 18 µs under load; a (16, 3,
    # 32, 32) one read 39% overhead quiet, over 50% beside two busy processes).
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3),  # bias=True by default
        nn.BatchNorm2d(16),
        nn.Flatten(),
        nn.Linear(16 * 30 * 30, 4),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    return (model, opt, torch.randn(64, 3, 32, 32), torch.randn(64, 4))


# trnlens: inputs=train_inputs
def train_step(model, opt, x, y):
    opt.zero_grad(set_to_none=False)
    out = model(x)
    loss = ((out - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss


# trnlens: inputs=train_inputs
def good_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = ((model[2:](model[1](torch.conv2d(x, model[0].weight))) - y) ** 2).mean()
    loss.backward()
    return loss


def bf16_inputs():
    return (torch.randn(30, 60, dtype=torch.bfloat16), torch.randn(60, 20, dtype=torch.bfloat16))


# trnlens: inputs=bf16_inputs
def bf16_matmul(a, b):
    c = a.float().sum()
    return a @ b, c


def aligned_inputs():
    return (torch.randn(32, 64, dtype=torch.bfloat16), torch.randn(64, 16, dtype=torch.bfloat16))


# trnlens: inputs=aligned_inputs
def aligned_matmul(a, b):
    return a @ b


def tiny_ops(x=torch.ones(4)):
    for _ in range(200):
        x = x + 1
    return x
"""


def by_id(result: dict) -> dict[str, dict]:
    assert result["error"] is None, result["error"]
    return {f["id"]: f for f in result["findings"]}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("patterns")
    (root / "pats.py").write_text(PATTERNS.lstrip("\n"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_training_step_patterns_at_their_lines(project):
    result = run(project, [{"path": "pats.py", "qualname": "train_step"}], steps=3)
    found = by_id(result)
    assert result["mode"] == "as-written"
    assert {"optimizer-single-tensor", "grad-not-set-to-none", "conv-bias-before-batchnorm"} <= set(
        found
    ), (found, result["warnings"])
    single = found["optimizer-single-tensor"]
    step_line = line_of(project, "pats.py", "opt.step()")
    assert (single["path"], single["line"]) == ("pats.py", step_line)
    assert single["op"] == "Optimizer.step#SGD.step" and single["fix"] == "foreach"
    # SGD without momentum: one add_ per parameter (conv w+b, bn w+b, linear w+b).
    assert single["details"]["dispatches"] == 6
    zeroed = found["grad-not-set-to-none"]
    assert zeroed["line"] == line_of(project, "pats.py", "opt.zero_grad(set_to_none=False)")
    # one per parameter at least (a conv backward on the bigger batch zeroes a buffer of its own)
    assert zeroed["fix"] == "set_to_none" and zeroed["details"]["zeroing_ops"] >= 6
    conv = found["conv-bias-before-batchnorm"]
    assert conv["line"] == line_of(project, "pats.py", "out = model(x)")
    assert conv["op"] == "aten::conv2d" and conv["fix"] == "conv_bias"
    for finding in found.values():
        assert 0 <= finding["share"] <= 1 and finding["time_us"] >= 0
        assert finding["matcher"] == "trnlens"
    assert "launch-bound" not in found, (found["launch-bound"], result["launch"])
    assert result["launch"]["dispatches"] == result["dispatches_per_step"]


def test_the_same_step_written_well_has_none_of_them(project):
    result = run(project, [{"path": "pats.py", "qualname": "good_step"}], steps=3)
    assert result["mode"] == "as-written"
    assert by_id(result) == {}


def test_bf16_matmul_with_an_unaligned_dimension(project):
    found = by_id(run(project, [{"path": "pats.py", "qualname": "bf16_matmul"}]))
    matmul = found["matmul-dim-not-multiple-of-8"]
    assert matmul["line"] == line_of(project, "pats.py", "return a @ b, c")
    assert matmul["op"] == "aten::mm" and matmul["matcher"] == "torch"
    assert matmul["fix"] is None  # padding a dimension is advice, never an automatic edit
    assert matmul["details"]["input_shapes"] == [[30, 60], [60, 20]]
    assert list(found) == ["matmul-dim-not-multiple-of-8"]


def test_bf16_matmul_aligned_is_fine(project):
    assert by_id(run(project, [{"path": "pats.py", "qualname": "aligned_matmul"}])) == {}


def test_a_loop_of_tiny_ops_is_launch_bound(project):
    result = run(project, [{"path": "pats.py", "qualname": "tiny_ops"}], steps=3)
    launch_bound = by_id(result)["launch-bound"]
    loop_line = line_of(project, "pats.py", "x = x + 1")
    assert (launch_bound["path"], launch_bound["line"]) == ("pats.py", loop_line)
    assert launch_bound["op"] == "aten::add"
    assert launch_bound["details"]["dispatches_from_line"] == 200
    launch = result["launch"]
    assert launch["dispatches"] == 200 and 0 < launch["idle_share"] < 1
    # Tiny adds: the dispatching is overhead (gaps plus tiny dispatches), whatever the load.
    assert launch["overhead_share"] >= 0.5 and launch_bound["share"] == launch["overhead_share"]
    assert launch["idle_share_min"] <= launch["idle_share"] <= launch["idle_share_max"]
    gap = launch["gaps"][0]
    assert gap["before"] == {"op": "aten::add", "path": "pats.py", "line": loop_line}


@pytest.mark.parametrize(
    "spec",
    [
        "samples/rmsnorm.py::rmsnorm_naive",
        "samples/rmsnorm.py::rmsnorm_fused",
        "samples/rmsnorm.py::rmsnorm_compiled",
        "samples/attention.py::naive_attention",
        "samples/attention.py::fused_attention",
        "samples/llama_block.py::DecoderBlock",
        "samples/graph_break.py::rmsnorm_logged",
        "samples/graph_break.py::rmsnorm_quiet",
    ],
)
def test_no_false_alarm_on_the_samples(spec, tmp_path):
    path, qualname = spec.split("::")
    shutil.copytree(REPO / "samples", tmp_path / "samples")  # runs leave nothing in the repo
    result = run(tmp_path, [{"path": path, "qualname": qualname}], repeats=1)
    assert result["mode"] == "inference"
    assert by_id(result) == {}
    if qualname in ("rmsnorm_compiled", "rmsnorm_logged", "rmsnorm_quiet"):
        assert result["launch"] is None  # compiled code: no eager dispatches to measure
    else:
        assert result["launch"]["idle_share"] < 0.5
