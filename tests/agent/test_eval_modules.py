"""Inference means eval: modules reachable from the inputs run in eval() and are restored after."""

from __future__ import annotations

import sys

import torch
from torch.profiler import ProfilerActivity, profile
from trnlens.cli.render import render_result

from tests.agent.conftest import run

NET = """
import torch
from torch import nn

OUTPUTS = []
MADE = []


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.bn(self.conv(x)).relu())


def build():
    torch.manual_seed(0)
    net = Net()  # built in training mode, as nn.Module's are
    net.drop.train(True)
    MADE.append(net)
    return {"nets": [net]}, torch.randn(2, 3, 16, 16)


# trnlens: inputs=build
def infer(holder, x):
    out = holder["nets"][0](x)
    OUTPUTS.append(out)
    return out
"""


def _dispatches(net, x) -> int:
    with torch.inference_mode():
        net(x)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            net(x)
    count = 0
    for event in prof.events():
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        count += event.name.startswith("aten::") and parent is None
    return count


def _loaded(root):
    path = str(root / "model.py")
    return next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == path)


def test_a_module_in_a_container_argument_runs_in_eval_and_is_restored(make_project):
    root = make_project({"model.py": NET})
    result = run(root, [{"path": "model.py", "qualname": "infer"}])
    module = _loaded(root)
    [net] = module.MADE
    assert net.training and net.bn.training and net.drop.training  # restored
    untouched = net.bn.running_mean.clone()  # before this test's own training-mode count
    x = torch.randn(2, 3, 16, 16)
    eval_count = _dispatches(net.eval(), x)
    train_count = _dispatches(net.train(), x)
    assert eval_count != train_count  # the test can tell them apart
    assert result["mode"] == "inference"
    assert result["dispatches_per_step"] == eval_count
    # Deterministic: Dropout was off in every call, warm-up, profiled and timing alike.
    outputs = module.OUTPUTS
    assert len(outputs) > 5
    assert all(torch.equal(out, outputs[0]) for out in outputs)
    # ...and it is the eval output: a fresh build (same seed) in eval mode gives it; BatchNorm's
    # running statistics were never updated.
    holder, same_x = module.build()
    fresh = holder["nets"][0].eval()
    with torch.inference_mode():
        assert torch.equal(fresh(same_x), outputs[0])
    assert torch.equal(untouched, fresh.bn.running_mean)
    assert result["eval_modules"] == {
        "modules": 4,
        "were_training": 4,
        "roots": ["holder"],
        "message": "inference runs in eval(): 4 nn.Modules reachable from holder (4 of them in "
        "training mode) ran in eval() and got their own training flags back after the run",
    }
    assert result["mode_reason"] == "auto: calls no backward or optimizer step"
    assert result["eval_modules"]["message"] in render_result(result)


def test_training_flags_are_restored_module_by_module(make_project):
    root = make_project({"model.py": NET.replace("net.drop.train(True)", "net.bn.eval()")})
    run(root, [{"path": "model.py", "qualname": "infer"}])
    [net] = _loaded(root).MADE
    assert net.training and net.conv.training and net.drop.training
    assert not net.bn.training  # its own flag, not its parent's


def test_as_written_mode_leaves_modules_as_they_are(make_project):
    root = make_project({"model.py": NET})
    result = run(root, [{"path": "model.py", "qualname": "infer"}], mode="as-written")
    outputs = _loaded(root).OUTPUTS
    assert "eval_modules" not in result
    assert not all(torch.equal(out, outputs[0]) for out in outputs)  # Dropout ran
