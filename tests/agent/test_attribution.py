"""Attribution through every frame (attribution.py, breakdown.py): a real model from a library.

A tiny random-weight LlamaForCausalLM from transformers (built from a config: nothing is
downloaded) profiled through a project function ``model(ids)``: every dispatch counts on the
library line that made it and on the nn.Module it ran in, and the counts agree with what plain
``torch.profiler`` sees when the test counts them itself.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import jsonschema
import pytest
import torch
from trnlens.results import schema

from tests.agent.conftest import forget_modules, line_of, run

LLAMA = """
import torch
from transformers import LlamaConfig, LlamaForCausalLM


def config(layers=2):
    return LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                       num_attention_heads=4, num_key_value_heads=4, vocab_size=100,
                       max_position_embeddings=64)


def build():
    torch.manual_seed(0)
    model = LlamaForCausalLM(config())
    ids = torch.randint(0, 100, (1, 16))
    return model, ids


# trnlens: inputs=build
def generate(model, ids):
    out = model(ids)
    return out.logits
"""


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """One run of the tiny Llama (the tests read it) and the model, for counting by hand."""
    before = set(sys.modules)
    root = tmp_path_factory.mktemp("llama")
    (root / "model.py").write_text(LLAMA.lstrip("\n"), encoding="utf-8")
    result = run(root, [{"path": "model.py", "qualname": "generate"}])
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.models.llama import modeling_llama

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, vocab_size=100,
                         max_position_embeddings=64)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 100, (1, 16))
    yield root, result, model, ids, modeling_llama
    forget_modules("transformers", before)


def _top_level_aten(events) -> int:
    """Dispatches as DESIGN.md counts them: aten ops no other aten op called."""
    count = 0
    for event in events:
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        count += parent is None
    return count


def _rmsnorm_by_hand(model, ids, modeling_llama) -> tuple[int, int]:
    """(calls of LlamaRMSNorm per forward, dispatches per call), counted with plain
    torch.profiler: the calls from its Python tracer's module events, the dispatches by
    profiling one norm alone on the hidden states it sees in the model."""
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode():
        model(ids)
        with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
            model(ids)
        calls = sum(1 for e in prof.events() if e.name.startswith("nn.Module: LlamaRMSNorm"))
        norm = model.model.norm
        hidden = torch.randn(1, ids.shape[1], model.config.hidden_size)
        norm(hidden)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            norm(hidden)
        per_call = _top_level_aten(prof.events())
    assert isinstance(norm, modeling_llama.LlamaRMSNorm)
    return calls, per_call


def test_frames_inside_the_library_rmsnorm_add_up_to_calls_times_dispatches(llama):
    root, result, model, ids, modeling_llama = llama
    calls, per_call = _rmsnorm_by_hand(model, ids, modeling_llama)
    assert calls == 5 and per_call >= 5  # 2 layers x 2 norms + the final one; naive: pow, mean...
    lines, start = inspect.getsourcelines(modeling_llama.LlamaRMSNorm.forward)
    path = inspect.getsourcefile(modeling_llama.LlamaRMSNorm)
    inside = [
        f for f in result["frames"] if f["path"] == path and start <= f["line"] < start + len(lines)
    ]
    assert {f["function"] for f in inside} == {"forward"}
    assert sum(f["dispatches_per_step"] for f in inside) == calls * per_call
    for frame in inside:
        assert frame["project"] is False
        assert frame["library"] == {"name": "transformers", "version": "4.57.6"}
        # They all came from the project's one line.
        call = line_of(root, "model.py", "out = model(ids)")
        assert frame["callers"] == [
            {"path": "model.py", "line": call, "dispatches_per_step": frame["dispatches_per_step"]}
        ]


def test_the_library_files_that_ran_are_listed_for_the_rules(llama):
    _, result, _, _, modeling_llama = llama
    files = {f["path"]: f["library"] for f in result["library_files"]}
    path = inspect.getsourcefile(modeling_llama)
    assert files[path] == {"name": "transformers", "version": "4.57.6"}
    assert files[inspect.getsourcefile(torch.nn.Linear)]["name"] == "torch"
    assert not any(p.endswith("model.py") and not p.startswith("/") for p in files)
    assert {f["path"] for f in result["frames"] if not f["project"]} <= set(files)


def test_every_dispatch_counts_on_one_frame_and_the_lines_agree(llama):
    root, result, *_ = llama
    total = sum(f["dispatches_per_step"] for f in result["frames"])
    total += result["frames_rest"]["dispatches_per_step"]
    assert total == result["dispatches_per_step"]
    line = line_of(root, "model.py", "out = model(ids)")
    assert [(e["path"], e["line"], e["dispatches"]) for e in result["lines"]] == [
        ("model.py", line, result["dispatches_per_step"])
    ]


def test_every_decoder_layers_norms_are_module_entries_with_their_dispatches(llama):
    root, result, model, ids, modeling_llama = llama
    _, per_call = _rmsnorm_by_hand(model, ids, modeling_llama)
    modules = {m["name"]: m for m in result["modules"]}
    for layer in range(2):
        for norm in ("input_layernorm", "post_attention_layernorm"):
            entry = modules[f"model.model.layers.{layer}.{norm}"]
            assert entry["type"] == "LlamaRMSNorm"
            assert entry["type_path"] == "transformers.models.llama.modeling_llama.LlamaRMSNorm"
            assert entry["calls_per_step"] == 1
            assert entry["dispatches_per_step"] == per_call
            assert entry["total_time_per_step_us"] == entry["self_time_per_step_us"] > 0
            assert (
                entry["source"]["line"]
                == inspect.getsourcelines(modeling_llama.LlamaRMSNorm.forward)[1]
            )
            call = line_of(root, "model.py", "out = model(ids)")
            assert entry["caller"] == {"path": "model.py", "line": call}
            assert entry["parent"] == f"model.model.layers.{layer}"
    # The tree adds up: the root module's total is every dispatch of the step.
    assert modules["model"]["type"] == "LlamaForCausalLM"
    assert modules["model"]["total_dispatches_per_step"] == result["dispatches_per_step"]


def test_sizes_are_bounded_with_the_rest_summed_and_the_module_tree_whole(make_project, llama):
    called = len(llama[1]["modules"])  # every module called (the ModuleList is never called)
    assert called == 32 and llama[1]["modules_rest"]["count"] == 0
    before = set(sys.modules)
    try:
        root = make_project({"model.py": LLAMA})
        result = run(root, [{"path": "model.py", "qualname": "generate"}],
                     options={"attribution_limit": 3, "timing": False})  # fmt: skip
    finally:
        forget_modules("transformers", before)
    assert len(result["frames"]) == 3 and result["frames_rest"]["count"] > 0
    kept = sum(f["dispatches_per_step"] for f in result["frames"])
    assert kept + result["frames_rest"]["dispatches_per_step"] == result["dispatches_per_step"]
    names = {m["name"] for m in result["modules"]}
    assert len(names) < called and result["modules_rest"]["count"] == called - len(names)
    for module in result["modules"]:
        assert module["parent"] is None or module["parent"] in names
    own = sum(m["dispatches_per_step"] for m in result["modules"])
    assert own + result["modules_rest"]["dispatches_per_step"] == result["dispatches_per_step"]


PROJECT_SYNC = """
import torch
from synclib import relu_if_negative


def small():
    return (torch.randn(8, 64),)


# trnlens: inputs=small
def step(x):
    y = x * 2
    z = relu_if_negative(y)
    return z + 1
"""


def test_a_host_sync_in_library_code_is_reported_at_its_line_and_the_calling_line(
    make_project, monkeypatch
):
    libs = Path(__file__).parent / "libs"
    monkeypatch.syspath_prepend(str(libs))
    root = make_project({"model.py": PROJECT_SYNC})
    try:
        result = run(root, [{"path": "model.py", "qualname": "step"}])
    finally:
        sys.modules.pop("synclib", None)
    library = libs / "synclib" / "__init__.py"
    sync_line = line_of(library.parent, "__init__.py", "if (x < 0).any():")
    call_line = line_of(root, "model.py", "z = relu_if_negative(y)")
    jsonschema.validate(result, schema())
    [sync] = result["host_syncs"]
    assert sync["op"] == "aten::is_nonzero" and sync["count_per_step"] == 1
    assert sync["frame"] == {"path": str(library), "line": sync_line,
                             "function": "relu_if_negative", "project": False,
                             "library": {"name": "synclib", "version": ""}}  # fmt: skip
    assert sync["caller"] == {"path": "model.py", "line": call_line}
    [finding] = [f for f in result["findings"] if f["id"] == "host-sync"]
    assert (finding["path"], finding["line"]) == ("model.py", call_line)
    assert finding["details"]["frame"]["line"] == sync_line
    assert finding["details"]["count_per_step"] == 1
    assert "synclib" in finding["message"] and "1x per step" in finding["message"]


def test_code_outside_any_library_has_no_host_sync(make_project):
    root = make_project({"model.py": "import torch\n\n\ndef f(x=torch.ones(4)):\n    return x + 1"})
    result = run(root, [{"path": "model.py", "qualname": "f"}])
    assert result["host_syncs"] == []
    assert not [f for f in result["findings"] if f["id"] == "host-sync"]
    [frame] = result["frames"]
    assert frame["project"] is True and frame["library"] is None
    assert (frame["path"], frame["line"], frame["function"]) == ("model.py", 5, "f")


def test_reachable_modules_are_named_from_the_parameters_and_containers():
    from types import SimpleNamespace

    from trnlens.agent.attribution import input_roots, reachable_modules

    encoder = torch.nn.Sequential(torch.nn.Linear(2, 2))
    shared = torch.nn.ReLU()
    nets = {"enc": encoder, "act": shared}

    def run_it(nets, pair, x):
        return x

    made = SimpleNamespace(instance=None, args=(nets, [shared, torch.nn.Tanh()], 1), kwargs={})
    names = [name for name, _ in reachable_modules(torch, input_roots(made, run_it, torch))]
    # A module reached twice keeps its first name; non-modules are passed over.
    assert names == ["nets.enc", "nets.enc.0", "nets.act", "pair.1"]


def test_a_file_belongs_to_the_distribution_that_installed_it():
    import json as stdlib_json

    from trnlens.agent.attribution import library_of

    assert library_of(torch.nn.modules.linear.__file__) == {
        "name": "torch",
        "version": torch.__version__,
    }
    assert library_of(stdlib_json.__file__)["name"] == "python"
    lib = Path(__file__).parent / "libs" / "synclib" / "__init__.py"
    sys.path.insert(0, str(lib.parent.parent))
    try:
        assert library_of(str(lib)) == {"name": "synclib", "version": ""}
    finally:
        sys.path.remove(str(lib.parent.parent))


TRAIN = """
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    return model, opt, torch.randn(8, 16)


# trnlens: inputs=build
def step(model, opt, x):
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss
"""


def test_a_training_step_splits_into_forward_modules_backward_and_the_optimizers_lines(
    make_project,
):
    root = make_project({"train.py": TRAIN})
    result = run(root, [{"path": "train.py", "qualname": "step"}])
    assert result["mode"] == "as-written" and "eval_modules" not in result
    frames = result["frames"]
    assert sum(f["dispatches_per_step"] for f in frames) == result["dispatches_per_step"]
    sgd = [f for f in frames if f["path"].endswith("torch/optim/sgd.py")]
    assert sgd and all(f["library"]["name"] == "torch" for f in sgd)
    opt_line = line_of(root, "train.py", "opt.step()")
    assert {c["line"] for f in sgd for c in f["callers"]} == {opt_line}
    # Backward's dispatches count where their forward ops ran (the Linear layers, the loss
    # line); the backward() line keeps what no forward op made: one AccumulateGrad a parameter.
    backward = next(f for f in frames if f["line"] == line_of(root, "train.py", "loss.backward()"))
    assert backward["project"] and backward["backward_dispatches_per_step"] == 4
    linear = [m for m in result["modules"] if m["type"] == "Linear"]
    assert all(m["backward_dispatches_per_step"] >= 2 for m in linear)  # weight and input grads
    names = [m["name"] for m in result["modules"]]
    assert names == ["model", "model.0", "model.1", "model.2"]
