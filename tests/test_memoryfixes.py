"""Which module class to checkpoint, read from a run (memoryfixes.py), on hand-made runs: the
repeated non-leaf class whose instances kept the most, never a leaf, never a lone instance,
nothing when the peak holds few activations. (Measured for real: tests/cli/
test_compare_checkpoint.py and tests/lsp/test_memory_checkpoint.py.)"""

from __future__ import annotations

import pytest
from trnlens import memoryfixes
from trnlens.fixvariants import NoFix


def _module(name: str, type_path: str, total: float = 100.0, backward: float = 40.0) -> dict:
    return {
        "name": name, "type": type_path.rsplit(".", 1)[-1], "type_path": type_path,
        "total_time_per_step_us": total, "total_backward_time_per_step_us": backward,
    }  # fmt: skip


def _run(kept: dict[str, int], activations_at_peak: int = 5_000, peak: int = 10_000) -> dict:
    modules = [_module("model", "m.Net", 500, 200)]
    for i in range(2):
        modules += [_module(f"model.{i}", "m.Block"), _module(f"model.{i}.up", "torch.Linear"),
                    _module(f"model.{i}.act", "torch.GELU")]  # fmt: skip
    modules.append(_module("model.head", "torch.Linear"))
    memory = {
        "device": "cpu", "steps": 2, "basis": "b", "peak_bytes": peak,
        "at_peak": {"activations": activations_at_peak}, "growth_per_step_bytes": 0,
        "growth": [],
        "activations_by_module": [{"module": m, "bytes": b} for m, b in kept.items()],
    }  # fmt: skip
    return {"modules": modules, "memory": memory, "function": {"path": "t.py", "qualname": "f"}}


KEPT = {"model.0.up": 1_000, "model.0.act": 1_000, "model.1.up": 1_000, "model.1.act": 1_000,
        "model.head": 3_000}  # fmt: skip


def test_the_repeated_non_leaf_class_that_kept_most_is_named_with_its_estimate():
    found = memoryfixes.checkpoint_candidate(_run(KEPT))
    assert found == memoryfixes.Candidate(
        type_path="m.Block", type="Block", instances=["model.0", "model.1"], kept_bytes=4_000,
        share=4_000 / 7_000, forward_us=2 * (100.0 - 40.0),
    )  # fmt: skip
    # Linear kept more in all (the head's 3 kB and the ups'), but a leaf is never proposed:
    # its output is kept by what reads it, so checkpointing it frees nothing
    assert memoryfixes.candidate_words(found) == (
        "checkpointing Block (2 instances) frees up to 4.0 KB kept for backward (57%) for about "
        "120 µs more a step (their forward, recomputed)"
    )
    assert memoryfixes.library_words(found) is None


def test_nothing_is_proposed_under_the_shares_or_without_a_memory_pass():
    # the blocks kept under a fifth of the activations
    assert memoryfixes.checkpoint_candidate(_run({**KEPT, "model.head": 30_000})) is None
    # the peak holds few activations: its peak is elsewhere (the optimizer's update)
    assert memoryfixes.checkpoint_candidate(_run(KEPT, activations_at_peak=500)) is None
    assert memoryfixes.checkpoint_candidate({"modules": [], "memory": None}) is None
    with pytest.raises(NoFix, match="names no module class to checkpoint"):
        memoryfixes.checkpoint_variants("t.py", "f", _run(KEPT, activations_at_peak=0))
    with pytest.raises(NoFix):
        memoryfixes.checkpoint_variants("t.py", "f", None)


def test_the_variants_swap_every_instances_forward_for_a_checkpointed_one():
    original, checkpointed = memoryfixes.checkpoint_variants("t.py", "f", _run(KEPT))
    assert original == {"path": "t.py", "qualname": "f", "label": "f"}
    assert checkpointed["label"] == "f (checkpointed: Block)"
    (swap,) = checkpointed["module_swaps"]
    # the agent's own checkpointed forward: no torch code leaves the server as text
    assert swap == {"type_path": "m.Block", "method": "forward", "kind": "checkpoint"}


def test_a_transformers_class_points_to_the_librarys_own_switch():
    run = _run(KEPT)
    for module in run["modules"]:
        if module["type_path"] == "m.Block":
            module.update(type_path="transformers.x.LlamaLayer", type="LlamaLayer")
    found = memoryfixes.checkpoint_candidate(run)
    assert found is not None and found.type == "LlamaLayer"
    assert "model.gradient_checkpointing_enable()" in (memoryfixes.library_words(found) or "")
