"""Benchmark: a 2-rank profile against a 1-rank profile of the same step, measured in one run.

The step (a few matmuls, then an all_reduce when a process group exists) is profiled, on the
local CPU with the same settings:
  - 1 rank: a fresh agent, no torchrun, no process group (the all_reduce is skipped);
    OMP_NUM_THREADS=1 like torchrun's ranks;
  - 2 ranks: a fresh agent that starts torchrun and 2 ranks (gloo), then merges them.
Each is run ROUNDS times, alternating; printed: the request's wall time (median, min-max), the
time spent in the user's code in every pass (accounting.steps_us; for 2 ranks, rank 0's), the
overhead (wall minus that), and the ratios 2-rank/1-rank. The machine's load is printed too:
on a shared 2-core machine, 2 ranks import torch at the same time and share the cores.
Run: .venv/bin/python bench/bench_ranks.py [--quick]
``--quick``: one round of short runs (two steps, two timed calls), to show the bench runs to its
end.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trnlens.jobs import ProfileRequest, run_profile  # noqa: E402
from trnlens.store import Store  # noqa: E402
from trnlens.targets.local import LocalTarget  # noqa: E402

ROUNDS = 3
STEP = textwrap.dedent("""
    import torch
    import torch.distributed as dist


    def step(x=torch.randn(256, 256)):
        y = x
        for _ in range(4):
            y = torch.tanh(y @ x)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(y)
        return y
""")


async def once(root: Path, nproc: int, quick: bool) -> dict:
    request = ProfileRequest(
        variants=[{"path": str(root / "step.py"), "qualname": "step"}], project_root=root,
        backend="cpu", warmup=1 if quick else 3, steps=2 if quick else 5,
        repeats=2 if quick else 20, nproc_per_node=nproc,
    )  # fmt: skip
    with Store(root) as store:
        started = time.perf_counter()
        # torchrun gives each rank OMP_NUM_THREADS=1 when unset: the 1-rank run gets the same,
        # or its step runs at another thread count (on a busy machine, many times slower).
        target = LocalTarget(env={"OMP_NUM_THREADS": "1"})
        result = (await run_profile(request, store, target)).data
        elapsed = time.perf_counter() - started
    steps = result["accounting"]["steps_us"] / 1e6
    return {"wall": elapsed, "steps": steps, "overhead": elapsed - steps,
            "step_us": result["wall_time_per_step_us"]}  # fmt: skip


def summary(samples: list[dict], key: str) -> str:
    values = [s[key] for s in samples]
    return f"{statistics.median(values):7.2f} s ({min(values):.2f}-{max(values):.2f})"


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    rounds = 1 if quick else ROUNDS
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "pyproject.toml").write_text("")
        (root / "step.py").write_text(STEP)
        runs: dict[int, list[dict]] = {1: [], 2: []}
        load = os.getloadavg()[0]
        for _ in range(rounds):
            for nproc in (1, 2):
                runs[nproc].append(asyncio.run(once(root, nproc, quick)))
        print(f"machine: {os.cpu_count()} cores, load {load:.1f} at start, "
              f"{os.getloadavg()[0]:.1f} at end; {rounds} rounds, alternating")  # fmt: skip
        for nproc in (1, 2):
            step_us = statistics.median(s["step_us"] for s in runs[nproc])
            print(
                f"{nproc} rank(s): request wall {summary(runs[nproc], 'wall')}, user code "
                f"{summary(runs[nproc], 'steps')}, overhead {summary(runs[nproc], 'overhead')}, "
                f"profiled step median {step_us:.0f} µs"
            )
        for key in ("wall", "overhead"):
            one = statistics.median(s[key] for s in runs[1])
            two = statistics.median(s[key] for s in runs[2])
            print(f"2 ranks / 1 rank, {key}: {two / one:.2f}x (+{two - one:.2f} s)")


if __name__ == "__main__":
    main()
