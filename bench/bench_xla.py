"""Benchmark: what trnlens's XLA profile costs against a hand-written torch-xla metrics script.

Both run the naive RMSNorm at (4, 512, 1024) on the real torch-xla's CPU PJRT device, in fresh
processes of the xla venv (scripts/setup-xla.sh), alternated REPEATS times so both see the same
machine. The baseline is what a user writes by hand: warm-up calls, then timed calls each ended
by ``torch_xla.sync()`` and ``wait_device_ops()``, with ``torch_xla.debug.metrics`` read around
them. Printed, measured in this one run:
  - the per-step median: trnlens's timing pass (its recorder's snapshots included) against the
    hand-written loop's (ratio; the recorder's own cost per call is ``collection_us`` / calls);
  - the whole profile's wall time (import, warm-up, profiled pass, timing pass, the sites step)
    against the hand-written script's (same import, warm-up and as many timed calls).
Goal: the per-step ratio within 1.10x (the recorder's snapshots are the difference).
Run: .venv/bin/python bench/bench_xla.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.xla.conftest import xla_env, xla_venv  # noqa: E402

REPEATS = 3
WARMUP, STEPS, CALLS = 3, 5, 20
MODULE = """
import torch


def inputs():
    return (torch.randn(4, 512, 1024), torch.randn(1024))


# trnlens: inputs=inputs
def rmsnorm_naive(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
"""
HAND = f"""
import statistics, sys, time
import torch, torch_xla, torch_xla.core.xla_model as xm, torch_xla.debug.metrics as met
sys.path.insert(0, sys.argv[1])
from step import inputs, rmsnorm_naive
dev = torch_xla.device()
x, w = (t.to(dev) for t in inputs())
def call():
    out = rmsnorm_naive(x, w)
    torch_xla.sync()
    xm.wait_device_ops()
    return out
for _ in range({WARMUP}):
    call()
samples = []
before = met.metric_data("ExecuteTime")[0]
for _ in range({CALLS}):
    began = time.perf_counter()
    call()
    samples.append((time.perf_counter() - began) * 1e6)
graphs = (met.metric_data("ExecuteTime")[0] - before) / {CALLS}
print(statistics.median(samples), graphs)
"""


def run(command: list[str], cwd: Path, stdin: str | None = None) -> tuple[str, float]:
    began = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=cwd,
                          env=xla_env(PYTHONPATH=str(REPO / "server")), timeout=900)  # fmt: skip
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return done.stdout, time.perf_counter() - began


def main() -> None:
    python = xla_venv() / "bin" / "python"
    if not python.exists():
        raise SystemExit("no xla venv: bash scripts/setup-xla.sh")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "step.py").write_text(MODULE)
        (root / "hand.py").write_text(HAND)
        request = json.dumps({
            "type": "profile", "id": "b", "project_root": str(root), "backend": "xla",
            "variants": [{"path": "step.py", "qualname": "rmsnorm_naive"}],
            "warmup": WARMUP, "steps": STEPS, "repeats": CALLS,
            "artifacts_dir": str(root / "stage"),
        }) + "\n"  # fmt: skip
        hand_step, hand_wall, ours_step, ours_wall, collection = [], [], [], [], []
        for _ in range(REPEATS):
            out, wall = run([str(python), "hand.py", str(root)], root)
            median, graphs = map(float, out.split())
            hand_step.append(median)
            hand_wall.append(wall)
            out, wall = run([str(python), "-m", "trnlens.agent"], root, request)
            result = next(json.loads(line)["result"] for line in out.splitlines()
                          if json.loads(line)["type"] == "result")  # fmt: skip
            ours_step.append(result["timing"]["median_us"])
            ours_wall.append(wall)
            x = result["xla"]
            calls = WARMUP + x["window_steps"]
            collection.append(x["collection_us"] / calls)
    h, o = statistics.median(hand_step), statistics.median(ours_step)
    print(f"load: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {REPEATS} runs each")
    print(f"graphs per step (hand-written): {graphs:.0f}; trnlens: {x['per_step']['graphs']}")
    print(f"per step: hand-written {h:.0f} µs, trnlens timing pass {o:.0f} µs: {o / h:.2f}x "
          f"(recorder's own cost {statistics.median(collection):.0f} µs per call)")  # fmt: skip
    hw, ow = statistics.median(hand_wall), statistics.median(ours_wall)
    print(
        f"whole run: hand-written {hw:.1f} s, trnlens profile {ow:.1f} s: {ow / hw:.2f}x "
        "(trnlens adds a profiled pass, the settling steps and the sites step)"
    )


if __name__ == "__main__":
    main()
