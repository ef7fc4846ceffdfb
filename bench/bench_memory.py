"""Benchmark: what the memory pass (agent/memorypass.py, issue 41) costs a profile.

The same fine-tuning step of a tiny random-weight LlamaForCausalLM from transformers (the
backward tests' step: hidden 64, 2 layers, (1, 16) token ids, AdamW, nothing downloaded),
profiled in one process (torch and transformers imported once) two ways, interleaved over
several rounds:
- ``without``: ``options.memory = False``: the profile as before issue 41, the named baseline;
- ``with``: the memory pass too (its own steps, recorded with memory, shapes and Python calls,
  then torch's memory timeline read).

Figures, medians over the rounds: the whole variant's wall time (the goal: within 1.3x), the
pass's own wall time (its steps and its reading), and the measured steps (the profiled wall
median and the timing pass's median: the pass runs after the headline steps and before the
timing pass, so neither should move). The machine's load is printed beside them.

Run: python bench/bench_memory.py [--rounds N]
``--quick``: one round of short runs (two steps, nothing settled), to show the bench runs to its
end.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "server"))

from trnlens.agent import memorypass  # noqa: E402

from bench import inprocess  # noqa: E402
from tests.agent.backward.by_hand import TRAIN as STEP  # noqa: E402  the tests' step

WAYS = {"without": {"memory": False}, "with": {"memory": True}}
GOAL = 1.3


class PassClock:
    """The memory pass's wall time in each run."""

    def __init__(self) -> None:
        self.spent_s = 0.0
        original = memorypass.run
        clock = self

        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                clock.spent_s += time.perf_counter() - began

        memorypass.run = timed  # measure.py calls it through the module


def profile(root: Path, options: dict, quick: bool) -> dict:
    variant = {"path": "train.py", "qualname": "step"}
    return inprocess.profile(
        root, variant, {"timing_budget_s": 1.0, **options}, quick=quick, warmup=2, steps=5,
        repeats=10,
    )  # fmt: skip


def main() -> None:
    rounds, quick = inprocess.rounds_from_args()
    clock = PassClock()
    with tempfile.TemporaryDirectory() as tmp:
        root = inprocess.step_project(Path(tmp), STEP)
        profile(root, WAYS["with"], quick)  # imports and first calls out of the figures
        figures: dict[str, dict[str, list]] = {
            w: {"variant": [], "pass": [], "step": [], "timing": []} for w in WAYS
        }
        memory = None
        for _ in range(rounds):
            for way, options in WAYS.items():
                clock.spent_s = 0.0
                result = profile(root, options, quick)
                figures[way]["variant"].append(result["accounting"]["variant_us"] / 1e6)
                figures[way]["pass"].append(clock.spent_s)
                figures[way]["step"].append(result["wall_time_per_step_us"] / 1e3)
                figures[way]["timing"].append(result["timing"]["median_us"] / 1e3)
                if way == "with":
                    memory = result["memory"]
    assert memory is not None, "the memory pass did not run"
    print(
        f"fine-tuning step of a tiny Llama: peak {memory['peak_bytes'] / 1e6:.2f} MB in "
        f"{memory['peak_phase']}, growth {memory['growth_per_step_bytes']} B a step; "
        f"{rounds} rounds, medians; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"{'':>8}  {'variant':>9}  {'memory pass':>11}  {'step (prof)':>11}  {'timing':>9}")
    med = {w: {k: statistics.median(v) for k, v in f.items()} for w, f in figures.items()}
    for way in WAYS:
        m = med[way]
        print(
            f"{way:>8}  {m['variant']:>7.2f} s  {m['pass']:>9.2f} s  {m['step']:>8.1f} ms  "
            f"{m['timing']:>6.1f} ms"
        )
    base, new = med["without"], med["with"]
    print(
        f"with / without: variant {new['variant'] / base['variant']:.2f}x (goal {GOAL}x), "
        f"profiled step {new['step'] / base['step']:.2f}x, "
        f"timing {new['timing'] / base['timing']:.2f}x"
    )


if __name__ == "__main__":
    main()
