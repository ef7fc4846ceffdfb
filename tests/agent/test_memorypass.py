"""The memory pass with real torch on the CPU (agent/memorypass.py): a training step whose sizes
are known in advance, read exactly: its parameters, AdamW's two moments and step counters, and a
list that grows by 4,000 bytes a step, placed on the line that makes what the list keeps."""

from __future__ import annotations

import pytest

from tests.agent.conftest import line_of, run

IN, HIDDEN, OUT, BATCH = 64, 128, 32, 16
FLOAT = 4
# nn.Linear(IN, HIDDEN) and nn.Linear(HIDDEN, OUT): weights and biases, float32
PARAMETERS = (IN * HIDDEN + HIDDEN + HIDDEN * OUT + OUT) * FLOAT
KEPT = 1000 * FLOAT  # torch.ones(1000) a step

STEP = f"""
import torch

model = torch.nn.Sequential(
    torch.nn.Linear({IN}, {HIDDEN}), torch.nn.ReLU(), torch.nn.Linear({HIDDEN}, {OUT})
)
opt = torch.optim.AdamW(model.parameters(), foreach=False)
history = []


def inputs():
    return (torch.randn({BATCH}, {IN}),)


# trnlens: inputs=inputs
def leaky(x):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    history.append(torch.ones(1000))
    return loss


# trnlens: inputs=inputs
def keeps_its_losses(x):
    loss = model(x).pow(2).mean()
    history.append(loss.detach())  # 4 bytes a step: under the growth floor
    return loss.detach()


# trnlens: inputs=inputs
def clean(x):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()  # clean's update
    opt.zero_grad()
    return loss.detach()
"""


@pytest.fixture
def step_root(make_project):
    return make_project({"train.py": STEP})


def result_of(root, qualname: str, **options) -> dict:
    result = run(root, [{"path": "train.py", "qualname": qualname}], mode="as-written", **options)
    assert result["error"] is None, result["error"]
    assert result["memory"] is not None, result["warnings"]
    return result


def memory_of(root, qualname: str, **options) -> dict:
    return result_of(root, qualname, **options)["memory"]


def test_a_step_that_keeps_a_tensor_a_step_grows_by_its_bytes_at_the_line_that_makes_it(
    step_root,
):
    memory = memory_of(step_root, "leaky")
    assert memory["growth_per_step_bytes"] == KEPT
    assert memory["growth"] == [
        {"path": "train.py", "line": line_of(step_root, "train.py", "history.append"),
         "bytes_per_step": KEPT},
    ]  # fmt: skip
    # the peak is in the last of the 2 steps: the one before it kept one tensor, at its line
    assert memory["at_peak"]["kept"] == KEPT
    kept = [r for r in memory["at_peak_by_line"] if r["kind"] == "kept"]
    assert kept == [{"path": "train.py", "line": line_of(step_root, "train.py", "history.append"),
                     "kind": "kept", "bytes": KEPT}]  # fmt: skip


def test_a_step_that_keeps_a_scalar_a_step_is_under_the_growth_floor(step_root):
    memory = memory_of(step_root, "keeps_its_losses")
    assert memory["growth_per_step_bytes"] == 0 and memory["growth"] == []
    # still held: the earlier step's scalar is live at the peak, as what it is
    assert memory["at_peak"].get("kept") == FLOAT


def test_the_peak_holds_parameters_gradients_and_adamws_moments_exactly(step_root):
    result = result_of(step_root, "clean")
    memory = result["memory"]
    assert memory["device"] == "cpu" and memory["steps"] == 2
    assert memory["growth_per_step_bytes"] == 0 and memory["growth"] == []
    # AdamW's update of the largest weight: every gradient is live, and its temporaries
    assert memory["peak_phase"] == "optimizer"
    update = line_of(step_root, "train.py", "clean's update")
    assert memory["peak_line"] == {"path": "train.py", "line": update}
    at_peak = memory["at_peak"]
    assert at_peak["parameters"] == PARAMETERS
    assert at_peak["gradients"] == PARAMETERS
    # exp_avg and exp_avg_sq of each parameter, and each parameter's float32 step count
    assert at_peak["optimizer_state"] == 2 * PARAMETERS + 4 * FLOAT
    assert at_peak["inputs"] == BATCH * IN * FLOAT
    assert "kept" not in at_peak and "other" not in at_peak
    assert memory["peak_bytes"] == sum(at_peak.values())
    # what the steps made that is live at the peak, by the line that made it: the update's
    # temporaries, backward's gradients (on its line), and nothing else of size
    made_at = {(r["line"], r["kind"]): r["bytes"] for r in memory["at_peak_by_line"]}
    assert made_at[(update, "temporaries")] == at_peak["temporaries"]
    assert made_at[(update - 1, "gradients")] == PARAMETERS  # clean's loss.backward()
    held_before = PARAMETERS + at_peak["optimizer_state"] + at_peak["inputs"]
    assert sum(made_at.values()) == memory["peak_bytes"] - held_before
    libraries = {(r["path"], r["kind"]) for r in memory["at_peak_by_library_line"]}
    assert ("torch/optim/adam.py", "temporaries") in libraries
    # the report's lane: the peak's step in 120 slices, and from each dispatch to the next; the
    # parameters live throughout
    curve = memory["curve"]
    assert curve["step"] in (0, 1) and len(curve["bytes"]) == 120
    for levels in (curve["bytes"], curve["dispatch_bytes"]):
        assert max(levels) == memory["peak_bytes"] and min(levels) >= PARAMETERS
    assert len(curve["dispatch_bytes"]) == result["dispatches_per_step"]
    assert len(curve["dispatch_digest"]) == 16


def test_activations_kept_for_backward_are_counted_at_the_module_that_made_them(step_root):
    memory = memory_of(step_root, "clean")
    kept = {row["module"]: row["bytes"] for row in memory["activations_by_module"]}
    # ReLU keeps its output and the second Linear its input (the same tensor: ReLU's), pow(2)
    # the second Linear's output; the first Linear's output is freed in forward: not kept
    assert kept["model.1"] == BATCH * HIDDEN * FLOAT
    assert kept["model.2"] == BATCH * OUT * FLOAT
    assert "model.0" not in kept
    assert [row["module"] for row in memory["activations_by_module"]][:2] == ["model.1", "model.2"]


def test_the_pass_is_left_out_on_request(step_root):
    result = run(
        step_root, [{"path": "train.py", "qualname": "clean"}], mode="as-written",
        options={"memory": False},
    )  # fmt: skip
    assert result["error"] is None
    assert result["memory"] is None


def test_a_comparison_measures_each_variants_memory_after_the_timed_rounds(step_root):
    variants = [
        {"path": "train.py", "qualname": "clean"},
        {"path": "train.py", "qualname": "leaky"},
    ]
    outcome = run(step_root, variants, mode="as-written")
    clean, leaky = outcome["variants"]
    assert clean["memory"]["growth_per_step_bytes"] == 0
    assert leaky["memory"]["growth_per_step_bytes"] == KEPT
    assert clean["memory"]["at_peak"]["parameters"] == PARAMETERS


def test_a_pass_that_torch_fails_to_read_runs_once_more_then_says_so(step_root, monkeypatch):
    """torch's reading of the memory profile now and then asserts ("duplicate outputs") on a
    loaded machine: the pass runs once more; a second failure is said, the run goes on."""
    from trnlens.agent import measure, memorypass

    real, calls = memorypass.run, []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise AssertionError("duplicate outputs: aten::tanh")
        return real(*args, **kwargs)

    monkeypatch.setattr(measure.memorypass, "run", flaky)
    result = result_of(step_root, "clean")  # a memory section, and no warning of the failure
    assert len(calls) == 2 and result["memory"]["peak_bytes"] > 0
    assert not [w for w in result["warnings"] if "memory pass failed" in w]

    def broken(*args, **kwargs):
        calls.append(1)
        raise AssertionError("duplicate outputs: aten::tanh")

    calls.clear()
    monkeypatch.setattr(measure.memorypass, "run", broken)
    result = run(step_root, [{"path": "train.py", "qualname": "clean"}], mode="as-written")
    assert len(calls) == measure.MEMORY_ATTEMPTS and result["memory"] is None
    assert any(
        w.startswith("the memory pass failed (AssertionError: duplicate outputs")
        for w in result["warnings"]
    )
