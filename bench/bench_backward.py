"""Benchmark: what putting backward at its forward (agent/backward/, issue 32) costs.

The same fine-tuning step of a tiny random-weight LlamaForCausalLM from transformers (hidden 64,
2 layers, (1, 16) token ids, nothing downloaded): forward with labels, ``loss.backward()``, AdamW
with ``foreach=True``. Profiled in one process (torch and transformers imported once) two ways,
interleaved over several rounds:
- ``without``: ``options.backward = False``: backward's dispatches stay on the ``backward()``
  line, as before issue 32: the named baseline;
- ``with``: each backward dispatch on the forward op, line, frame and module that made its node.

Nothing is added to the measured steps either way (the profiler records the sequence numbers the
link reads whether it is used or not), so the cost is reading: linking each engine event to its
forward op and the tables that count both directions. Figures, medians over the rounds: this
thread's CPU time in the attribution tables (``Breakdown``: its construction, the links included,
and ``frames()``/``modules()``; ``thread_time``, which other processes inflate less than wall
time), the whole variant's wall time, and result.json's size. The step itself is printed for
scale (the profiled wall median).

Run: python bench/bench_backward.py [--rounds N]
``--quick``: one round of short runs (two steps, nothing settled), to show the bench runs to its
end.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "server"))

from trnlens.agent import breakdown  # noqa: E402

from bench import inprocess  # noqa: E402
from tests.agent.backward.by_hand import TRAIN as STEP  # noqa: E402  the tests' step

WAYS = {"without": {"backward": False}, "with": {"backward": True}}


class TableClock:
    """This thread's CPU time inside the attribution tables (Breakdown), per run."""

    def __init__(self) -> None:
        self.spent_us = 0.0
        for name in ("__init__", "frames", "modules"):
            self._wrap(name)

    def _wrap(self, name: str) -> None:
        original = getattr(breakdown.Breakdown, name)
        clock = self

        def timed(*args, **kwargs):
            began = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                clock.spent_us += (time.thread_time() - began) * 1e6

        setattr(breakdown.Breakdown, name, timed)


def profile(root: Path, options: dict, quick: bool) -> dict:
    """One run; ``quick``: one warm-up step, two steps and two timed calls, none to settle."""
    variant = {"path": "train.py", "qualname": "step"}
    return inprocess.profile(
        root, variant, {"timing_budget_s": 1.0, **options}, quick=quick, warmup=2, steps=3,
        repeats=3,
    )  # fmt: skip


def main() -> None:
    rounds, quick = inprocess.rounds_from_args()
    clock = TableClock()
    with tempfile.TemporaryDirectory() as tmp:
        root = inprocess.step_project(Path(tmp), STEP)
        profile(root, WAYS["with"], quick)  # imports and first calls out of the figures
        figures: dict[str, dict[str, list]] = {
            w: {"tables": [], "variant": [], "step": [], "size": []} for w in WAYS
        }
        moved = None
        for _ in range(rounds):
            for way, options in WAYS.items():
                clock.spent_us = 0.0
                result = profile(root, options, quick)
                figures[way]["tables"].append(clock.spent_us)
                figures[way]["variant"].append(result["accounting"]["variant_us"])
                figures[way]["step"].append(result["wall_time_per_step_us"])
                figures[way]["size"].append(len(json.dumps(result, indent=1).encode()))
                if way == "with":
                    moved = sum(m.get("backward_dispatches_per_step", 0) for m in result["modules"])
                    dispatches = result["dispatches_per_step"]
    print(f"fine-tuning step of a tiny Llama: {dispatches} dispatches a step, {moved:g} backward "
          f"dispatches put on their modules; {rounds} rounds, medians")  # fmt: skip
    print(f"{'':>8}  {'tables (CPU)':>13}  {'variant (wall)':>14}  {'step (wall)':>12}  "
          f"{'result.json':>11}")  # fmt: skip
    med = {w: {k: statistics.median(v) for k, v in f.items()} for w, f in figures.items()}
    for way in WAYS:
        m = med[way]
        print(f"{way:>8}  {m['tables'] / 1e3:>10.1f} ms  {m['variant'] / 1e6:>12.2f} s  "
              f"{m['step'] / 1e3:>9.1f} ms  {m['size'] / 1e3:>8.1f} kB")  # fmt: skip
    base, new = med["without"], med["with"]
    print(
        f"with / without: tables {new['tables'] / base['tables']:.2f}x "
        f"(+{(new['tables'] - base['tables']) / 1e3:.1f} ms a run), "
        f"variant {new['variant'] / base['variant']:.2f}x, "
        f"result.json {new['size'] / base['size']:.2f}x"
    )


if __name__ == "__main__":
    main()
