"""A comparison of variants: one snapshot of the inputs for all, interleaved timing, the envelope.

Every variant starts from a deep copy of one snapshot of the inputs (modules, optimizers and
tensors copied together) with the RNGs reseeded, and its output is its first call's (captured in
its first warm-up step, measure.py), so identical code gives identical outputs however many steps
each variant's passes run. The baseline's first call is made once more from a fresh copy (the one
documented extra call of a comparison): when it disagrees with itself its outputs depend on state
outside the inputs, and the comparison says "outputs not comparable" instead of a max |diff|.
The variants' timing calls are interleaved in rounds (rounds.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import heap, inputs, rounds, swaps
from .measure import Cancelled, Measurement, Measurer
from .protocol import SCHEMA_VERSION
from .settling import timing_figures


@dataclass
class Timed:
    """A variant whose timing waits for the interleaved rounds."""

    index: int
    measurer: Measurer
    measurement: Measurement
    step: Callable[[], Any]
    # the variant's module swaps (swaps.py), undone after its own passes: each of its round
    # calls puts them back for the call, or the "fixed" variant would time the original code
    swapped: list[tuple] = field(default_factory=list)


@dataclass
class Snapshots:
    """The inputs each variant of a comparison starts from, keyed by (file, inputs source)."""

    comparing: bool
    taken: dict[tuple[str, str], Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # why state may carry over between variants

    def start_from(self, key: tuple[str, str], made: inputs.Inputs) -> inputs.Inputs:
        """The inputs a variant starts from: in a comparison, a deep copy of the snapshot taken
        of the first variant's inputs with the same key (instance, args and kwargs copied
        together, so an optimizer in the args keeps pointing at the copied module's
        parameters); ``made`` itself when there is nothing to copy from."""
        if not self.comparing:
            return made
        snap = self.taken.get(key)
        if snap is None:
            try:
                snap = copy.deepcopy((made.instance, made.args, made.kwargs, made.description))
            except Exception as exc:  # a tensor in the middle of a graph, a lock, a generator
                self.taken[key] = False
                self.notes.append(
                    f"the inputs could not be copied ({type(exc).__name__}: {exc}): each variant "
                    "built its own, and state they share outside the inputs carries over"
                )
                return made
            self.taken[key] = snap
            return made  # its state is the snapshot's: nothing has run on it yet
        if snap is False:
            return made
        instance, args, kwargs, description = copy.deepcopy(snap)
        return inputs.Inputs(args, kwargs, instance, description)


def time_in_rounds(
    timed: list[Timed],
    results: list[dict],
    repeats: int,
    budget_s: float,
    cancelled: Callable[[], bool],
) -> None:
    """Times the variants that ran in interleaved rounds (rounds.py) and gives each its
    figures, stability verdict and warnings; the per-round times stay for the ratios."""
    timed = [entry for entry in timed if not results[entry.index]["error"]]
    if not timed:
        return

    def check() -> None:
        if cancelled():
            raise Cancelled()

    calls = [(lambda entry=entry: round_call(entry)) for entry in timed]
    with heap.frozen():  # the agent's own objects are not the variants' cost (heap.py)
        samples = rounds.interleave(calls, repeats, budget_s * len(calls), settle_rounds=2,
                                    check=check)  # fmt: skip
    for entry, times in zip(timed, samples, strict=True):
        m, measurer = entry.measurement, entry.measurer
        faults = measurer.round_faults[-len(times) :] if times else []
        swaps.redo(entry.swapped)  # the variant's memory pass runs in finish: as the variant
        try:
            measurer.finish(m, timing_figures(times, faults) if times else None)
        finally:
            swaps.undo(entry.swapped)
        result = results[entry.index]
        result["timing"] = m.timing
        result["memory"] = m.memory
        result["stability"] = m.stability
        result["time_scale"] = m.time_scale  # lines and findings were rescaled in place
        result["warnings"].extend(w for w in m.warnings if w not in result["warnings"])
        result["accounting"]["steps_us"] = m.steps_us
        result["_rounds"] = times


def round_call(entry: Timed) -> float:
    """One round call of a variant, with its module swaps in place for the call only."""
    swaps.redo(entry.swapped)
    try:
        return entry.measurer.round_call(entry.step)
    finally:
        swaps.undo(entry.swapped)


def envelope(
    results: list[dict],
    notes: list[str],
    replay: Callable[[], list[Any] | None] | None,
    torch: Any,
) -> dict:
    """The comparison answered for ``results`` (the baseline first): speedups from the rounds,
    max |diff| of the outputs against the baseline's; each run keeps its own share too."""
    base = results[0]
    speedups: list[float | None] = []
    ranges: list[list[float] | None] = []
    diffs: list[float | None] = []
    baseline_out = base.get("_output")
    not_comparable = outputs_note(base, replay, torch)
    for r in results:
        speedup, span = None, None
        if r.get("_rounds") and base.get("_rounds") and not r["error"] and not base["error"]:
            speedup, span = rounds.ratio_figures(base["_rounds"], r["_rounds"])
        speedups.append(speedup)
        ranges.append(span)
        diffs.append(
            None if not_comparable else max_abs_diff(baseline_out, r.get("_output"), torch)
        )
    warnings = list(notes)
    if not_comparable:
        warnings.append(not_comparable)
    if len({str(r["inputs"]) for r in results if r["inputs"]}) > 1:
        warnings.append("the variants ran on different inputs: compare their figures with care")
    for index, r in enumerate(results):
        r.pop("_output", None)
        r.pop("_rounds", None)
        # Kept on each stored variant too: the comparison envelope itself is not stored.
        r["comparison"] = {
            "baseline_run_id": base["run_id"],
            "index": index,
            "speedup": speedups[index],
            "speedup_range": ranges[index],
            "speedup_method": "rounds",
            "max_abs_diff": diffs[index],
        }
        if not_comparable:
            r["comparison"]["outputs_not_comparable"] = not_comparable
    found = {
        "schema_version": SCHEMA_VERSION,
        "variants": results,
        "baseline": 0,
        "speedups": speedups,
        "speedup_ranges": ranges,
        "speedup_method": "rounds",
        "max_abs_diff": diffs,
        "warnings": warnings,
    }
    if not_comparable:
        found["outputs_not_comparable"] = not_comparable
    return found


def outputs_note(
    base: dict, replay: Callable[[], list[Any] | None] | None, torch: Any
) -> str | None:
    """Why the variants' outputs cannot be compared, or None: the baseline's first call,
    made again from a fresh copy of the same snapshot with the same seeds, must give the
    same output, or what it returns depends on state outside its inputs (module globals,
    files) or on nondeterminism, and any difference between variants means nothing."""
    if replay is None or base["error"] or not base.get("_output"):
        return None  # no tensor output: there is no difference to give anyway
    try:
        again = replay()
    except Exception as exc:  # the code ran once already: a second failure is still a fact
        return (
            "outputs not comparable: the baseline could not be run again from the same "
            f"state ({type(exc).__name__}: {exc})"
        )
    if again is None:
        return None
    drift = max_abs_diff(base["_output"], again, torch)
    if drift is not None and drift != drift:  # NaN: no difference can be read from it
        return "outputs not comparable: the baseline's output contains NaN"
    if drift is None or drift > 0:
        what = "a different shape" if drift is None else f"max |diff| {drift:.3g}"
        return (
            "outputs not comparable: the baseline run twice from the same inputs and seeds "
            f"gave different outputs ({what}): they depend on state outside the inputs "
            "(module globals, files) or on nondeterminism, so no max |diff| is given"
        )
    return None


def max_abs_diff(a: list[Any] | None, b: list[Any] | None, torch: Any) -> float | None:
    if a is None or b is None or len(a) != len(b) or not a:
        return None
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            return None
        if x.numel():
            worst = max(worst, float((x.double() - y.double()).abs().max()))
    return worst
