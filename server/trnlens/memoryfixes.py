"""A fix that trades time for memory, measured: activation checkpointing of a module class.

What a training step keeps for backward (the memory pass's activations by module) is often most
of its peak. Activation checkpointing (``torch.utils.checkpoint``) keeps only a module's inputs
and recomputes its forward during backward: less memory, more time. Which class to checkpoint
is read from the run: the repeated, non-leaf module class (a decoder layer, a block) whose
instances and their children kept the most. A leaf (a Linear) is never proposed: its output is
kept by whatever reads it, so checkpointing it frees nothing.

The estimate (``kept_bytes``, ``forward_us``) is an upper bound on the saving and about the
time it costs; ``trnlens compare --checkpoint PATH::QUALNAME`` measures both: the function as
it is against the same function with every instance of that class checkpointed (a module swap,
``agent/swaps.py``, ``agent/checkpointing.py``: the instances' ``forward`` wrapped, the
library's files untouched), each
variant's peak and time, and the outputs compared. Pure (no torch).
"""

from __future__ import annotations

from collections import defaultdict

import attrs

from trnlens import memoryfigures, units
from trnlens.fixvariants import NoFix

# A class whose instances kept less than this share of the step's kept activations is not
# proposed: checkpointing it could not change the peak by much.
MIN_SHARE = 0.2
# Nor when the activations live at the peak are under this share of it: the peak is elsewhere
# (the gradients and the optimizer's update of a small batch), and no checkpointing lowers it.
MIN_PEAK_SHARE = 0.1

# The code the editor's Measure action sends (lsp/actions.py, lsp/analysis.py compare)
CHECKPOINT_CODE = "memory-checkpoint"


@attrs.frozen
class Candidate:
    """The module class to checkpoint, and what the run says it would save and cost."""

    type_path: str
    type: str
    instances: list[str]  # the outermost instances' names, as the step reaches them
    kept_bytes: int  # what they and their children kept for backward: the most it can free
    share: float  # of all the step kept for backward
    forward_us: float  # their forward time per step: about what recomputing it costs


def checkpoint_candidate(result: dict) -> Candidate | None:
    """The repeated non-leaf module class whose instances kept the most for backward (at least
    :data:`MIN_SHARE` of it), or None (no memory pass, no backward, or no such class)."""
    memory = memoryfigures.read(result)
    if memory is None or not memory.activations_by_module:
        return None
    if memory.at_peak.get("activations", 0) < MIN_PEAK_SHARE * memory.peak_bytes:
        return None
    kept = {k.module: k.bytes for k in memory.activations_by_module}
    total = sum(kept.values())
    modules = [m for m in result.get("modules") or [] if m.get("name") and m.get("type_path")]
    names = [m["name"] for m in modules]
    by_class: dict[str, list[dict]] = defaultdict(list)
    for entry in modules:
        if any(other.startswith(entry["name"] + ".") for other in names):  # not a leaf
            by_class[entry["type_path"]].append(entry)
    best: Candidate | None = None
    for type_path, entries in by_class.items():
        outer = [e for e in entries if not any(_inside(e["name"], o["name"]) for o in entries)]
        if len(outer) < 2:  # one instance: checkpointing it recomputes most of the step
            continue
        size = sum(b for name, b in kept.items() if any(_within(name, e["name"]) for e in outer))
        if total <= 0 or size / total < MIN_SHARE:
            continue
        forward = sum(
            max(
                float(e.get("total_time_per_step_us") or 0)
                - float(e.get("total_backward_time_per_step_us") or 0),
                0.0,
            )
            for e in outer
        )
        found = Candidate(type_path, str(outer[0].get("type") or type_path.rsplit(".", 1)[-1]),
                          [e["name"] for e in outer], size, size / total, forward)  # fmt: skip
        if best is None or found.kept_bytes > best.kept_bytes:
            best = found
    return best


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def _inside(name: str, module: str) -> bool:
    return name != module and name.startswith(module + ".")


def candidate_words(candidate: Candidate) -> str:
    """``checkpointing Block (4 instances) frees up to 96.0 KB kept for backward (75%) for
    about 1.20 ms more a step (their forward, recomputed)``."""
    return (
        f"checkpointing {candidate.type} ({len(candidate.instances)} instances) frees up to "
        f"{units.data_size(candidate.kept_bytes)} kept for backward ({candidate.share:.0%}) "
        f"for about {units.duration(candidate.forward_us)} more a step (their forward, "
        "recomputed)"
    )


def library_words(candidate: Candidate) -> str | None:
    """What the library offers for the same thing, where it is one that does."""
    if candidate.type_path.startswith("transformers."):
        return (
            "in your code, transformers' `model.gradient_checkpointing_enable()` checkpoints its "
            "layers (and turns the cache off for training)"
        )
    return None


def measure_command(relpath: str, qualname: str) -> str:
    return f"trnlens compare --checkpoint {relpath}::{qualname}"


def checkpoint_variants(path: str, qualname: str, run: dict | None) -> list[dict]:
    """``[original, original with the candidate class checkpointed]``; raises NoFix."""
    candidate = checkpoint_candidate(run) if run else None
    if candidate is None:
        raise NoFix(
            f"the latest run of {qualname} names no module class to checkpoint (it needs a "
            "training step's memory pass whose peak holds activations, and a repeated module "
            f"class with children that keeps at least {MIN_SHARE:.0%} of them)"
        )
    # the agent's own checkpointed forward (agent/checkpointing.py): torch code stays there
    swap = {"type_path": candidate.type_path, "method": "forward", "kind": "checkpoint"}
    return [
        {"path": path, "qualname": qualname, "label": qualname},
        {"path": path, "qualname": qualname, "module_swaps": [swap],
         "label": f"{qualname} (checkpointed: {candidate.type})"},
    ]  # fmt: skip
