"""Fine-tuning steps on the real torch-xla (CPU PJRT), as an optimum-neuron user writes them
(issue 40): every step with a backward() profiles; backward counts on the forward's lines,
modules and library lines; the step's own syncs and host reads are at their lines.

One agent process answers every request (torch-xla and transformers import once)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import jsonschema
import pytest
from trnlens import memoryfigures
from trnlens.results import schema

from tests.xla.test_xla_agent import run_agent

FIXTURE = Path(__file__).parent / "fixtures" / "training.py"
STEPS = (
    "sgd_step",
    "clipped_step",
    "accumulated_step",
    "logging_step",
    "llama_finetune",
    "accumulated_one_graph",
)


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.fixture(scope="module")
def results(xla_python, tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("xla-training")
    shutil.copy(FIXTURE, root / "training.py")
    requests = [
        {"type": "profile", "id": name, "project_root": str(root), "backend": "xla",
         "variants": [{"path": "training.py", "qualname": name}],
         "warmup": 2, "steps": 2, "repeats": 2, "artifacts_dir": str(root / "stage")}
        for name in STEPS
    ]  # fmt: skip
    # the same step again in the same (warm) agent: its graphs are compiled already
    requests.append({**requests[0], "id": "sgd_step again"})
    return run_agent(xla_python, root, requests)


TEXT = FIXTURE.read_text()


def xla_of(results: dict, name: str) -> tuple[dict, dict]:
    message = results[name]
    assert message["type"] == "result", message
    result = message["result"]
    assert result["error"] is None, result["error"]
    jsonschema.validate(result, schema())
    assert result["mode"] == "as-written"
    return result, result["xla"]


def lines_of(x: dict) -> dict[int, dict]:
    return {row["line"]: row for row in x["lines"]}


def test_an_sgd_step_profiles_with_backward_on_the_forwards_lines_and_modules(results):
    """Before: "internal error: call stack is not deep enough" for every step with backward()."""
    _, x = xla_of(results, "sgd_step")
    assert x["per_step"]["graphs"] == 1 and x["compiles_in_window"] == 0
    assert x["skipped"] == [] and x["forced"] == [] and x["fallbacks"] == []
    lines = lines_of(x)
    up, down = line_of(TEXT, "h = self.act(self.up(x))"), line_of(TEXT, "return self.down(h)")
    for forward in (up, down):  # each forward line also carries the backward its ops made
        assert lines[forward]["backward_ops"] > 0 and lines[forward]["backward_ir_nodes"] > 0
        assert lines[forward]["ops"] > lines[forward]["backward_ops"]
    # The optimizer the factory built over the host model updates the moved parameters (its
    # params were pointed at the XLA ones): its line made IR nodes of the step's graph.
    step_line = line_of(TEXT, "    optimizer.step()")
    assert lines[step_line]["ir_nodes"] > 0 and lines[step_line]["backward_ops"] == 0
    modules = {m["name"]: m for m in x["modules"]}
    assert {"model", "model.up", "model.act", "model.down"} <= set(modules)
    assert modules["model.up"]["parent"] == "model"
    assert modules["model.down"]["backward_ir_nodes"] > 0
    assert modules["model"]["total_ir_nodes"] == sum(
        modules[n]["ir_nodes"] for n in ("model", "model.up", "model.act", "model.down")
    )


def test_library_lines_have_full_paths_and_the_project_lines_that_called_them(results):
    result, x = xla_of(results, "sgd_step")
    linear = next(r for r in x["library_lines"] if r["path"].endswith("torch/nn/modules/linear.py"))
    assert os.path.isabs(linear["path"]) and linear["function"] == "forward"
    assert linear["library"]["name"] == "torch"
    assert linear["ir_nodes"] > 0 and linear["backward_ir_nodes"] > 0
    called_from = {c["line"] for c in linear["callers"]}
    assert called_from == {line_of(TEXT, "self.up(x)"), line_of(TEXT, "return self.down(h)")}
    files = {f["path"] for f in result["library_files"]}
    assert linear["path"] in files  # what the library rules read after the run


def test_clipping_and_xm_optimizer_step_profile_at_their_lines(results):
    _, x = xla_of(results, "clipped_step")
    lines = lines_of(x)
    clip = line_of(TEXT, "nn.utils.clip_grad_norm_(model.parameters(), 1.0)")
    update = line_of(TEXT, "xm.optimizer_step(optimizer)")
    assert lines[clip]["ir_nodes"] > 0 and lines[update]["ir_nodes"] > 0
    assert x["per_step"]["graphs"] == 1
    # AdamW's state appears at its first step: the second graph differs, once, in warm-up, at
    # the optimizer's own line (torch's, so torch-xla's location names it)
    (warm,) = [r for r in x["recompiles"] if r["phase"] == "warmup"]
    assert warm["kind"] == "graph" and "adam.py" in warm["location"], warm
    assert "optimizer's state appears" in warm["advice"] and x["compiles_in_window"] == 0


def test_gradient_accumulation_with_mark_step_counts_every_micro_batchs_graph(results):
    _, x = xla_of(results, "accumulated_step")
    sync = line_of(TEXT, "xm.mark_step()")
    assert x["syncs"] == [{"path": "training.py", "line": sync, "count": 4}]
    assert x["step_graphs"] == 5 and x["per_step"]["graphs"] == 5
    assert f"the step syncs itself at training.py:{sync} (4x)" in x["message"]
    assert x["forced"] == []  # a sync the step makes is no forced execution of an op
    forward = lines_of(x)[line_of(TEXT, "return self.down(h)")]
    assert forward["graphs"] == [1, 2, 3, 4] and forward["backward_ir_nodes"] > 0


def test_a_loss_logged_every_step_is_a_forced_execution_at_its_line(results):
    _, x = xla_of(results, "logging_step")
    logged = line_of(TEXT, 'print(f"loss {loss.item():.4f}")')
    forced = [f for f in x["forced"] if f["line"] == logged]
    assert [f["op"] for f in forced] == ["aten::_local_scalar_dense"]
    assert forced[0]["executions"] == 1 and x["per_step"]["graphs"] == 2
    assert f"forced executions at training.py:{logged}" in x["message"]
    assert "xm.add_step_closure" in forced[0]["advice"]


def test_accumulation_without_a_sync_is_one_graph_said_at_the_backward_line(results):
    _, x = xla_of(results, "accumulated_one_graph")
    assert x["backward_passes"] == 4 and x["per_step"]["graphs"] == 1 and x["syncs"] == []
    start = line_of(TEXT, "def accumulated_one_graph")
    backward = start + 3  # its loss.backward()
    assert TEXT.splitlines()[backward - 1].strip() == "loss.backward()"
    assert [(f["kind"], f["line"]) for f in x["findings"]] == [
        ("accumulation-in-one-graph", backward)
    ]
    assert "4 backward passes (micro-batches) in one graph" in x["findings"][0]["message"]
    assert "xm.mark_step()" in x["findings"][0]["advice"]
    # with a mark_step per micro-batch: no such finding
    _, synced = xla_of(results, "accumulated_step")
    assert synced["findings"] == [] and synced["backward_passes"] == 4


def test_a_transformers_llama_fine_tuning_step_has_backward_on_its_modules(results):
    result, x = xla_of(results, "llama_finetune")
    assert x["per_step"]["graphs"] == 1 and x["compiles_in_window"] == 0
    modules = {m["name"]: m for m in x["modules"]}
    q_proj = modules["model.model.layers.0.self_attn.q_proj"]
    assert q_proj["type"] == "Linear" and q_proj["parent"] == "model.model.layers.0.self_attn"
    assert q_proj["backward_ops"] > 0 and q_proj["backward_ir_nodes"] > 0
    norm = modules["model.model.layers.1.input_layernorm"]
    assert norm["type"] == "LlamaRMSNorm" and norm["backward_ir_nodes"] > 0
    llama = [r for r in x["library_lines"] if r["path"].endswith("modeling_llama.py")]
    assert llama and all(os.path.isabs(r["path"]) for r in llama)
    assert {r["library"]["name"] for r in llama} == {"transformers"}
    assert any(r["backward_ir_nodes"] > 0 for r in llama)
    assert any(f["path"].endswith("modeling_llama.py") for f in result["library_files"])


def test_a_warm_repeat_compiles_nothing_and_says_so(results):
    _, cold = xla_of(results, "sgd_step")
    assert cold["first_call"]["compiles"] >= 1
    assert "the first call compiled nothing" not in cold["message"]
    _, warm = xla_of(results, "sgd_step again")
    assert warm["first_call"]["compiles"] == 0 and warm["first_call"]["cache_hits"] >= 1
    assert warm["warmup_compiles"] == 0 and warm["compiles_in_window"] == 0
    assert "the first call compiled nothing" in warm["message"]


# Net's two Linear layers, float32: what every step holds on the device as parameters
NET_BYTES = (32 * 64 + 64 + 64 * 8 + 8) * 4


def test_the_device_memory_held_between_steps_is_counted_exactly(results):
    """Issue 41 on XLA: the tensors the step's inputs reach on the device after its sync, by
    kind; the CPU plugin gives no allocator figures, and the section says why."""
    _, x = xla_of(results, "sgd_step")
    memory = x["memory"]
    # plain SGD keeps no state; zero_grad() at the step's start leaves the gradients held
    assert memory["held_bytes"] == {
        "parameters": NET_BYTES, "gradients": NET_BYTES, "optimizer_state": 0, "buffers": 0,
    }  # fmt: skip
    assert memory["held_total_bytes"] == 2 * NET_BYTES
    assert memory["allocator"] is None and "UNIMPLEMENTED" in memory["allocator_note"]
    # AdamW's two moments on the device (its step counts are CPU tensors), gradients set to
    # None at the step's end
    _, x = xla_of(results, "clipped_step")
    assert x["memory"]["held_bytes"] == {
        "parameters": NET_BYTES, "gradients": 0, "optimizer_state": 2 * NET_BYTES, "buffers": 0,
    }  # fmt: skip
    words = memoryfigures.xla_memory_words(x)
    assert words[0].startswith(
        "held on the device between steps: parameters 10.5 KB · optimizer state 21.1 KB "
        "(31.6 KB in all;"
    ), words
    assert words[1].startswith("the device's allocator: this PJRT plugin gives no allocator")
