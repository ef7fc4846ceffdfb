"""How many times a profile calls the user's function: every call is one of the passes' steps.

The outputs (a comparison's max |diff|) come from the first warm-up call: no call is made only to
capture them, which for a training step would be one more optimizer step. The count per run, on
the CPU with ``settle_steps=0`` (every pass settles at once) and a timing budget that lets every
repeat run (measure.py):
  warm-up    max(warmup, 1)          (the first call is timed as first_call_us)
  headline   1 + steps               (one step under the profiler's warm-up, then the recorded)
  lines      1 + 1 + min(steps, 3)   (a step under the mode, the profiler's warm-up, recorded)
  timing     1 + repeats             (one settling call, then the timed ones)
  memory     memorypass.STEPS        (after the timing; recorded at once: no time is read)
and, in a comparison, one more call of the baseline from a fresh copy of the inputs (the check
that its outputs depend on its inputs alone: comparison.outputs_note).
"""

from __future__ import annotations

import pytest
from trnlens.agent import memorypass

from tests.agent.conftest import run

COUNTED = """
import pathlib

import torch

COUNT = pathlib.Path(__file__).with_name("calls.txt")
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def forward(x=torch.ones(2, 4)):
    with COUNT.open("a") as handle:
        handle.write("c")
    return x * 2


def train_step(x=torch.ones(2, 4)):
    with COUNT.open("a") as handle:
        handle.write("c")
    loss = model(x).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.detach()
"""
EXACT = {"settle_steps": 0, "timing_budget_s": 600.0}


def calls(root) -> int:
    return len((root / "calls.txt").read_text())


@pytest.mark.parametrize("qualname", ["forward", "train_step"])
def test_a_profile_calls_the_function_once_per_pass_step_and_no_more(make_project, qualname):
    root = make_project({"counted.py": COUNTED})
    warmup, steps, repeats = 2, 3, 4
    result = run(root, [{"path": "counted.py", "qualname": qualname}], warmup=warmup,
                 steps=steps, repeats=repeats, options=EXACT)  # fmt: skip
    assert result["error"] is None
    expected = max(warmup, 1) + (1 + steps) + (2 + min(steps, 3)) + memorypass.STEPS + (1 + repeats)
    assert calls(root) == expected


def test_without_lines_memory_and_timing_only_warm_up_and_profiled_steps_run(make_project):
    root = make_project({"counted.py": COUNTED})
    options = {**EXACT, "lines": False, "timing": False, "memory": False}
    run(root, [{"path": "counted.py", "qualname": "train_step"}], warmup=1, steps=2,
        options=options)  # fmt: skip
    assert calls(root) == 1 + (1 + 2)


def test_a_comparison_adds_one_call_of_the_baseline(make_project):
    root = make_project({"counted.py": COUNTED})
    options = {**EXACT, "lines": False, "timing": False}
    variants = [
        {"path": "counted.py", "qualname": "forward"},
        {"path": "counted.py", "qualname": "forward", "label": "again"},
    ]
    outcome = run(root, variants, warmup=1, steps=2, options=options)
    assert outcome["max_abs_diff"] == [0.0, 0.0]  # outputs kept from the first warm-up calls
    # each variant's memory pass too: a comparison reports each one's peak (issue 41)
    assert calls(root) == 2 * (1 + (1 + 2) + memorypass.STEPS) + 1
