"""An out-of-memory failure read as one (agent/outofmemory.py), with real torch on the CPU: the
bytes asked for, the module whose forward ran, and what was live, exactly, by kind."""

from __future__ import annotations

import json
import subprocess
import sys

from trnlens.agent import outofmemory

from tests.agent.conftest import line_of, run

TOO_MANY = 1 << 50  # float32 elements: 4 PiB, more than any machine here has

WIDE = f"""
class Wide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(64, 32)

    def forward(self, x):
        return self.proj(x) + torch.empty({TOO_MANY})[:32]  # asks for too much
"""

# A step that trained once (gradients and AdamW's state exist), then asks for too much inside a
# module's forward. In a process of its own: the live tensors are all the step's.
AFTER_A_STEP = f"""
import json, torch
from trnlens.agent import outofmemory

{WIDE}

model = torch.nn.Sequential(Wide())
opt = torch.optim.AdamW(model.parameters(), foreach=False)
model[0].proj(torch.randn(8, 64)).sum().backward()
opt.step()
try:
    model(torch.randn(8, 64))
except RuntimeError as exc:
    names = {{id(m): name for name, m in model.named_modules(prefix="model")}}
    print(json.dumps(outofmemory.read(exc, names)))
"""
PARAMETERS = (64 * 32 + 32) * 4


def test_what_was_live_when_an_allocation_failed_is_read_by_kind_exactly():
    done = subprocess.run(
        [sys.executable, "-c", AFTER_A_STEP], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["device"] == "cpu"
    assert found["requested_bytes"] == TOO_MANY * 4
    assert found["module"] == "model.0 (Wide)"
    live = found["live"]
    assert live["parameters"] == PARAMETERS
    assert live["gradients"] == PARAMETERS
    # exp_avg and exp_avg_sq of both parameters, and each one's float32 step count
    assert live["optimizer_state"] == 2 * PARAMETERS + 2 * 4
    # the failed call's input (8 x 64 floats), held by its frames
    assert live["other"] == 8 * 64 * 4


OOM_STEP = f"""
import torch

{WIDE}

def inputs():
    return torch.nn.Sequential(Wide()), torch.randn(8, 64)


# trnlens: inputs=inputs
def step(model, x):
    return model(x).sum()
"""


def test_a_run_that_runs_out_of_memory_says_so_at_its_line_and_module(make_project):
    root = make_project({"oom.py": OOM_STEP})
    result = run(root, [{"path": "oom.py", "qualname": "step"}], mode="as-written")
    error = result["error"]
    assert error["kind"] == "user_code" and error["type"] == "RuntimeError"
    assert (error["path"], error["line"]) == ("oom.py", line_of(root, "oom.py", "too much"))
    assert error["message"] == (
        f"out of memory on cpu in model.0 (Wide): the allocation asked for {TOO_MANY * 4:,} "
        "bytes (RuntimeError)"
    )
    found = error["out_of_memory"]
    assert found["module"] == "model.0 (Wide)" and found["requested_bytes"] == TOO_MANY * 4
    assert found["live"]["parameters"] >= PARAMETERS  # (this process holds other tests' too)
    assert error["traceback"]  # kept, for whoever wants it


def test_the_allocators_words_are_recognised_and_other_failures_are_not():
    cuda = RuntimeError(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"
    )
    found = outofmemory.read(cuda, {})
    assert found["device"] == "cuda" and found["requested_bytes"] == 2 << 30
    assert found["module"] is None
    xla = RuntimeError("RESOURCE_EXHAUSTED: Error allocating device buffer")
    found = outofmemory.read(xla, {})
    assert found["device"] == "xla" and found["requested_bytes"] is None
    assert found["live"] is None  # the device runtime's memory: not read
    assert outofmemory.words(found) == "out of memory on xla"
    found = outofmemory.read(MemoryError(), {})
    assert found["device"] == "cpu" and found["requested_bytes"] is None
    assert outofmemory.words(found) == "out of memory on cpu"
    assert outofmemory.read(ValueError("shapes do not match"), {}) is None
    assert outofmemory.read(RuntimeError("index out of range"), {}) is None
