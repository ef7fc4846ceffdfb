"""Backward at its forward on a fine-tuning step of a tiny transformers Llama (random weights from
a config, nothing downloaded): forward, ``loss.backward()``, AdamW with ``foreach=True``.

The test counts backward by hand with plain ``torch.profiler``: torch's own Python tracer names
each module call (``nn.Module: LlamaRMSNorm_0``, ``with_stack=True``: no trnlens hook), and the
test follows each backward node to the forward op that took its sequence number and that op to
its innermost module event. trnlens's modules must carry exactly those counts, and take at least
80% of what the ``backward()`` line held before (the same run without backward attribution).
"""

from __future__ import annotations

import inspect
import sys
from collections import defaultdict

import jsonschema
import pytest
from trnlens.results import schema

from tests.agent.backward.by_hand import TRAIN, backward_by_hand
from tests.agent.conftest import forget_modules, line_of, run


@pytest.fixture(scope="module")
def finetune(tmp_path_factory):
    before = set(sys.modules)
    root = tmp_path_factory.mktemp("finetune")
    (root / "train.py").write_text(TRAIN.lstrip("\n"), encoding="utf-8")
    variant = [{"path": "train.py", "qualname": "step"}]
    # Every frame kept: the RMSNorm's lines must not fall into frames_rest by their time.
    result = run(root, variant, options={"attribution_limit": "all"})
    without = run(root, variant, options={"backward": False})
    namespace: dict = {}
    exec(compile(TRAIN, str(root / "train.py"), "exec"), namespace)
    by_hand = backward_by_hand(*namespace["build"]())
    yield root, result, without, by_hand
    forget_modules("transformers", before)


def _by_class_index(modules):
    """trnlens's module rows keyed as torch's tracer names them: class and the instance's index
    among that class's instances in first-call order (rows are in first-call order)."""
    seen: dict = defaultdict(int)
    keyed = {}
    for row in modules:
        keyed[(row["type"], seen[row["type"]])] = row
        seen[row["type"]] += 1
    return keyed


def test_each_modules_backward_equals_plain_torch_profilers(finetune):
    _, result, _, (counts, _, _) = finetune
    assert result["modules_rest"]["count"] == 0  # every module is listed
    rows = _by_class_index(result["modules"])
    ours = {key: row["backward_dispatches_per_step"] for key, row in rows.items()}
    assert {k: v for k, v in ours.items() if v} == dict(counts)
    assert sum(counts.values()) > 200  # most of a step's backward: checked, not vacuous
    norm = rows[("LlamaRMSNorm", 0)]
    assert norm["name"] == "model.model.layers.0.input_layernorm"
    # A naive RMSNorm's backward costs more dispatches than its forward.
    forward = norm["dispatches_per_step"] - norm["backward_dispatches_per_step"]
    assert norm["backward_dispatches_per_step"] > forward > 0


def test_the_modules_take_over_80_percent_of_what_the_backward_line_held(finetune):
    root, result, without, (_, engine_run, unlinked) = finetune
    backward_line = line_of(root, "train.py", "out.loss.backward()")
    forward_line = line_of(root, "train.py", "out = model(ids, labels=ids)")
    before = next(e for e in without["lines"] if e["line"] == backward_line)
    after = next(e for e in result["lines"] if e["line"] == backward_line)
    assert before["backward"]["dispatches"] == engine_run  # the engine's every dispatch was there
    on_modules = sum(m["backward_dispatches_per_step"] for m in result["modules"])
    assert on_modules >= 0.8 * before["dispatches"]
    # What no forward made stays on the backward() line, and nothing is lost or counted twice.
    assert after["backward"]["dispatches"] == unlinked
    assert after["dispatches"] == before["dispatches"] - on_modules
    forward_after = next(e for e in result["lines"] if e["line"] == forward_line)
    forward_before = next(e for e in without["lines"] if e["line"] == forward_line)
    assert forward_after["dispatches"] == forward_before["dispatches"] + on_modules
    assert forward_after["backward"]["dispatches"] == on_modules
    assert sum(e["dispatches"] for e in result["lines"]) == result["dispatches_per_step"]
    assert result["modules"][0]["total_backward_dispatches_per_step"] == on_modules
    # The backward parts are parts: on the same time basis as the figures they are parts of.
    for entry in result["lines"]:
        part = entry.get("backward") or {"cpu_us": 0.0, "dispatches": 0}
        assert part["cpu_us"] <= entry["cpu_us"] and part["dispatches"] <= entry["dispatches"]
    for row in result["modules"]:
        assert row["total_backward_time_per_step_us"] <= row["total_time_per_step_us"]
        assert row["backward_self_time_per_step_us"] <= row["self_time_per_step_us"]


def test_library_lines_carry_the_backward_of_their_ops(finetune):
    _, result, _, _ = finetune
    from transformers.models.llama import modeling_llama

    lines, start = inspect.getsourcelines(modeling_llama.LlamaRMSNorm.forward)
    path = inspect.getsourcefile(modeling_llama.LlamaRMSNorm)
    inside = [
        f for f in result["frames"] if f["path"] == path and start <= f["line"] < start + len(lines)
    ]
    norms = [m for m in result["modules"] if m["type"] == "LlamaRMSNorm"]
    assert sum(f["backward_dispatches_per_step"] for f in inside) == sum(
        m["backward_dispatches_per_step"] for m in norms
    )
    total = sum(f["dispatches_per_step"] for f in result["frames"])
    assert total + result["frames_rest"]["dispatches_per_step"] == result["dispatches_per_step"]
    jsonschema.Draft202012Validator(schema()).validate(result)
    assert result["schema_version"] == 4


def test_the_naive_rmsnorm_finding_counts_both_directions(finetune):
    from trnlens.libraries import rules

    _, result, _, (counts, _, _) = finetune
    (finding,) = [f for f in rules.library_findings(result) if f["owner"] == "LlamaRMSNorm"]
    norms = [m for m in result["modules"] if m["type"] == "LlamaRMSNorm"]
    assert finding["calls_per_step"] == len(norms) == 5
    assert finding["dispatches_per_step"] == sum(m["dispatches_per_step"] for m in norms)
    backward = sum(counts[("LlamaRMSNorm", i)] for i in range(5))  # plain torch.profiler's
    assert finding["backward_dispatches_per_step"] == backward > 0
    forward = (finding["dispatches_per_step"] - backward) / 5
    assert (
        f"{forward:g} dispatches forward and {backward / 5:g} backward per call, 5 calls"
        in (finding["message"])
    )


def test_the_memory_pass_reads_the_llamas_parameters_and_adamws_state_exactly(finetune):
    """Issue 41 on a transformers model: the same run's memory (the pass is on by default)."""
    root, result, _, _ = finetune
    namespace: dict = {}
    exec(compile(TRAIN, str(root / "train.py"), "exec"), namespace)
    model, _, _ = namespace["build"]()
    parameters = list(model.parameters())
    size = sum(p.numel() * p.element_size() for p in parameters)
    memory = result["memory"]
    assert memory["growth_per_step_bytes"] == 0 and memory["growth"] == []
    at_peak = memory["at_peak"]
    assert at_peak["parameters"] == size
    # AdamW's exp_avg and exp_avg_sq of each parameter, and its float32 step count
    assert at_peak["optimizer_state"] == 2 * size + 4 * len(parameters)
    kept = [row["module"] for row in memory["activations_by_module"]]
    # named as the step's argument reaches them ("model" is the LlamaForCausalLM)
    assert kept and all(name.split(".")[0] in ("model", "(no module)") for name in kept)
    assert "model.model.layers.0.self_attn" in kept and "model.lm_head" in kept
