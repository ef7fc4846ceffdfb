"""Training steps as people write them: mode auto finds backward/optimizer steps statically and
runs them as written; training mode on such a step says where the first backward is."""

from __future__ import annotations

import importlib.util

import torch
from trnlens.agent import loader, steps

from tests.agent.conftest import line_of, run

STEP = """
import torch
from torch import nn


def step_inputs():
    model = nn.Linear(16, 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    return (model, optimizer, torch.randn(8, 16), torch.randn(8, 4))


def update(loss, optimizer):
    loss.backward()
    optimizer.step()


# trnlens: inputs=step_inputs
def train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    update(loss, optimizer)
    return loss


# trnlens: inputs=step_inputs
def forward_only(model, optimizer, x, y):
    scheduler = SCHEDULERS.get("s")
    if scheduler is not None:
        scheduler.step()  # a scheduler's step is no optimizer's
    return model(x)


SCHEDULERS = {}


class Trainer:
    def __init__(self):
        self.net = nn.Linear(4, 4)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def fit(self, x):
        self.net(x).sum().backward()
        self._apply()

    def _apply(self):
        self.opt.step()
"""


def _import(root, name):
    spec = importlib.util.spec_from_file_location(f"steps_{name}", root / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_backward_in_a_called_project_function_is_found(make_project):
    root = make_project({"train.py": STEP})
    module = _import(root, "train.py")
    project = loader.Project(root=str(root))
    found = steps.find_training_call(module.train_step, module, None, project, torch)
    assert (found.what, found.path) == ("loss.backward()", "train.py")
    assert found.line == line_of(root, "train.py", "loss.backward()")


def test_forward_only_and_scheduler_step_are_not_training(make_project):
    root = make_project({"train.py": STEP})
    module = _import(root, "train.py")
    project = loader.Project(root=str(root))
    assert steps.find_training_call(module.forward_only, module, None, project, torch) is None


def test_optimizer_step_found_through_self_methods(make_project):
    root = make_project({"train.py": STEP})
    module = _import(root, "train.py")
    project = loader.Project(root=str(root))
    trainer = module.Trainer()
    found = steps.find_training_call(trainer.fit, module, trainer, project, torch)
    assert found.what == "self.net(x).sum().backward()"
    # Without the backward, the optimizer step in a method it calls counts.
    found = steps.find_training_call(trainer._apply, module, trainer, project, torch)
    assert (found.what, found.line) == ("self.opt.step()", line_of(root, "train.py", "opt.step()"))


def test_auto_runs_a_training_step_as_written_and_says_why(make_project):
    root = make_project({"train.py": STEP})
    result = run(root, [{"path": "train.py", "qualname": "train_step"}], warmup=1, steps=3)
    assert result["error"] is None
    assert result["mode"] == "as-written"
    backward = line_of(root, "train.py", "loss.backward()")
    reason = f"auto: calls loss.backward() at train.py:{backward} (a training step)"
    assert result["mode_reason"] == reason
    # Adam creates its state (exp_avg, exp_avg_sq) on the first step: that is warm-up, so every
    # profiled step dispatches the same ops, and the state's zeros are nowhere in the figures.
    assert not any("differ from step to step" in w for w in result["warnings"])
    assert float(result["dispatches_per_step"]).is_integer()
    assert not any(op["name"] == "aten::zeros_like" for op in result["ops"])
    assert any("Optimizer.step#Adam.step" == op["name"] for op in result["ops"])


def test_auto_keeps_inference_for_a_forward(make_project):
    root = make_project({"train.py": STEP})
    result = run(root, [{"path": "train.py", "qualname": "forward_only"}])
    assert (result["mode"], result["mode_reason"]) == (
        "inference",
        "auto: calls no backward or optimizer step",
    )


def test_training_mode_on_a_training_step_names_the_backward_line(make_project):
    root = make_project({"train.py": STEP})
    from trnlens.agent.errors import AgentError

    try:
        run(root, [{"path": "train.py", "qualname": "train_step"}], mode="training")
    except AgentError as exc:
        error = exc
    else:
        raise AssertionError("training mode ran a second backward")
    assert error.kind == "usage"
    assert (error.path, error.line) == ("train.py", line_of(root, "train.py", "loss.backward()"))
    assert "--mode as-written" in error.message


def test_inference_mode_on_a_training_step_says_what_to_use(make_project):
    root = make_project({"train.py": STEP})
    result = run(root, [{"path": "train.py", "qualname": "train_step"}], mode="inference")
    error = result["error"]
    assert (error["path"], error["line"]) == (
        "train.py",
        line_of(root, "train.py", "loss.backward()"),
    )
    assert error["message"].startswith("RuntimeError: element 0 of tensors does not require grad")
    assert "--mode as-written runs it as written" in error["message"]
