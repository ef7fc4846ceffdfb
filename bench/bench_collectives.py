"""Benchmark: what reading the collectives costs, on the same 2-rank DDP step, measured in one run.

The step: DistributedDataParallel over a 5-layer MLP (2 gradient buckets), forward, backward
(DDP's bucketed all-reduce, launched by its reducer during backward), 2 ranks under torchrun,
gloo on the CPU. Profiled alternately, ROUNDS times each, with the same settings:
  - with collective reading (the default): the Python collectives and ``backward()`` labelled
    (collectives/wrapper.py), every call read from the profile (collectives/calls.py), DDP's
    buckets mapped to modules (collectives/owners.py);
  - without it (``options.collectives = false``): no label, no reading.
Printed (medians with min-max over rounds): the profiled step (rank 0's wall median: what the
labels add inside the measured step), the timing pass's median (no profiler), the agent's CPU
time reading the calls after the profile (the slowest rank's; CPU time, so a busy machine does not
inflate it), and the request's wall time; the ratios with / without. The machine's load is
printed too (2 ranks share 2 cores).
Run: nice -n 10 .venv/bin/python bench/bench_collectives.py [--quick]
``--quick``: one round of short runs (two steps, two timed calls), 200 labels, to show the bench
runs to its end.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trnlens.jobs import ProfileRequest, run_profile  # noqa: E402
from trnlens.store import Store  # noqa: E402

ROUNDS = 3
STEP = (REPO / "samples" / "ddp_step.py").read_text()  # the DDP sample


async def once(root: Path, reading: bool, quick: bool) -> dict:
    request = ProfileRequest(
        variants=[{"path": str(root / "step.py"), "qualname": "step"}], project_root=root,
        backend="cpu", warmup=1 if quick else 3, steps=2 if quick else 5,
        repeats=2 if quick else 20, nproc_per_node=2,
        options={"collectives": reading, "lines": False, "timing_budget_s": 1.0},
    )  # fmt: skip
    with Store(root) as store:
        started = time.perf_counter()
        result = (await run_profile(request, store)).data
        elapsed = time.perf_counter() - started
    assert result["error"] is None, result["error"]
    read = [r for r in result["accounting"].get("collectives_read_us") or [] if r is not None]
    calls = sum(len(t["collectives"]) for t in result["rank_timelines"])
    return {
        "wall_s": elapsed,
        "step_us": result["wall_time_per_step_us"],
        "timing_us": (result.get("timing") or {}).get("median_us"),
        "read_us": max(read) if read else 0.0,
        "calls": calls,
    }


def label_cost_us(calls: int = 20_000) -> float:
    """CPU µs one label costs inside a profiled step (what the wrappers add per call: a frame
    walk and a record_function under an active profiler), measured in this process."""
    import sys as _sys

    import torch

    record_function = torch.profiler.record_function
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        started = time.thread_time()
        for _ in range(calls):
            _sys._getframe(0)  # the frame walk's first step (the walk stops at the caller)
            with record_function("trnlens.collective:issuer:backward@step.py:21"):
                pass
        return (time.thread_time() - started) / calls * 1e6


def summary(samples: list[dict], key: str, unit: str = "") -> str:
    values = [s[key] for s in samples if s[key] is not None]
    return f"{statistics.median(values):.4g}{unit} ({min(values):.4g}-{max(values):.4g})"


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    rounds = 1 if quick else ROUNDS
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "pyproject.toml").write_text("")
        (root / "step.py").write_text(STEP)
        runs: dict[bool, list[dict]] = {True: [], False: []}
        load = os.getloadavg()[0]
        for _ in range(rounds):
            for reading in (True, False):
                runs[reading].append(asyncio.run(once(root, reading, quick)))
        print(f"machine: {os.cpu_count()} cores, load {load:.1f} at start, "
              f"{os.getloadavg()[0]:.1f} at end; {rounds} rounds each, alternating")  # fmt: skip
        for reading in (True, False):
            name = "with collective reading   " if reading else "without (collectives off)"
            r = runs[reading]
            print(
                f"{name}: profiled step {summary(r, 'step_us', ' µs')}, timing median "
                f"{summary(r, 'timing_us', ' µs')}, reading {summary(r, 'read_us', ' µs')} "
                f"CPU, request {summary(r, 'wall_s', ' s')}, calls read "
                f"{statistics.median(s['calls'] for s in r):.0f}"
            )
        labels = label_cost_us(200 if quick else 20_000)
        print(f"one label inside a profiled step: {labels:.2f} µs CPU (the DDP step has "
              "one, backward()'s; each Python collective call adds one)")  # fmt: skip
        for key in ("step_us", "timing_us", "wall_s"):
            on = statistics.median(s[key] for s in runs[True])
            off = statistics.median(s[key] for s in runs[False])
            print(f"with / without, {key}: {on / off:.2f}x ({on - off:+.4g})")


if __name__ == "__main__":
    main()
