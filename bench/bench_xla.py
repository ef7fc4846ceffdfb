"""Benchmark: what trnlens's XLA profile costs against a hand-written torch-xla metrics script.

Two cases, each on the real torch-xla's CPU PJRT device in fresh processes of the xla venv
(scripts/setup-xla.sh), alternated REPEATS times so both see the same machine: the naive RMSNorm
at (4, 512, 1024), and a fine-tuning step (a transformers Llama with AdamW: forward, backward,
optimizer step; issue 40). The baseline is what a user writes by hand: warm-up calls, then
timed calls each ended by ``torch_xla.sync()`` and ``wait_device_ops()``, with
``torch_xla.debug.metrics`` read around them. Printed, measured in this one run:
  - the per-step median: trnlens's timing pass (its recorder's snapshots included) against the
    hand-written loop's (ratio; the recorder's own cost per call is ``collection_us`` / calls);
  - the whole profile's wall time (import, warm-up, profiled pass, timing pass, the sites step)
    against the hand-written script's (same import, warm-up and as many timed calls).
Goal: the per-step ratio within 1.10x (the recorder's snapshots are the difference).
Run: .venv/bin/python bench/bench_xla.py [--quick]
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


def inputs(device):
    return (torch.randn(4, 512, 1024, device=device), torch.randn(1024, device=device))


# trnlens: inputs=inputs
def rmsnorm_naive(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
"""
# The cases: (module text, function, factory). The fine-tuning step is the tests' transformers
# Llama (AdamW, forward + backward + optimizer step: tests/xla/fixtures/training.py).
TRAINING = (REPO / "tests" / "xla" / "fixtures" / "training.py").read_text()
CASES = {
    "rmsnorm forward": (MODULE, "rmsnorm_naive", "inputs"),
    "llama fine-tuning step": (TRAINING, "llama_finetune", "llama_inputs"),
}
# --quick: the same two kinds of step, the fine-tuning one on the tests' two-layer net (AdamW,
# clipping, xm.optimizer_step): the Llama's graphs take minutes to compile on a loaded 2-core
# machine, and the bench's code path is the same
QUICK_CASES = {
    "rmsnorm forward": CASES["rmsnorm forward"],
    "fine-tuning step (quick: a two-layer net, AdamW)": (TRAINING, "clipped_step", "adamw_inputs"),
}
HAND = """
import statistics, sys, time
import torch, torch_xla, torch_xla.core.xla_model as xm, torch_xla.debug.metrics as met
sys.path.insert(0, sys.argv[1])
from step import {factory} as make, {function} as function
dev = torch_xla.device()
args = [a.to(dev) if isinstance(a, torch.Tensor) else a for a in make(dev)]
def call():
    out = function(*args)
    torch_xla.sync()
    xm.wait_device_ops()
    return out
for _ in range({warmup}):
    call()
samples = []
before = met.metric_data("ExecuteTime")[0]
for _ in range({calls}):
    began = time.perf_counter()
    call()
    samples.append((time.perf_counter() - began) * 1e6)
graphs = (met.metric_data("ExecuteTime")[0] - before) / {calls}
print(statistics.median(samples), graphs)
"""


def run(command: list[str], cwd: Path, stdin: str | None = None) -> tuple[str, float]:
    began = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=cwd,
                          env=xla_env(PYTHONPATH=str(REPO / "server")), timeout=900)  # fmt: skip
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return done.stdout, time.perf_counter() - began


def measure(python: Path, case: str, repeats: int, calls: int) -> None:
    text, function, factory = {**CASES, **QUICK_CASES}[case]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "step.py").write_text(text)
        (root / "hand.py").write_text(HAND.format(factory=factory, function=function,
                                                  warmup=WARMUP, calls=calls))  # fmt: skip
        request = json.dumps({
            "type": "profile", "id": "b", "project_root": str(root), "backend": "xla",
            "variants": [{"path": "step.py", "qualname": function}],
            "warmup": WARMUP, "steps": STEPS, "repeats": calls,
            "artifacts_dir": str(root / "stage"),
        }) + "\n"  # fmt: skip
        hand_step, hand_wall, ours_step, ours_wall, collection = [], [], [], [], []
        for _ in range(repeats):
            out, wall = run([str(python), "hand.py", str(root)], root)
            median, graphs = map(float, out.split())
            hand_step.append(median)
            hand_wall.append(wall)
            out, wall = run([str(python), "-m", "trnlens.agent"], root, request)
            result = next(json.loads(line)["result"] for line in out.splitlines()
                          if json.loads(line)["type"] == "result")  # fmt: skip
            if result["error"]:
                raise SystemExit(f"{case}: {result['error']['message'][:2000]}")
            ours_step.append(result["timing"]["median_us"])
            ours_wall.append(wall)
            x = result["xla"]
            collection.append(x["collection_us"] / (WARMUP + x["window_steps"]))
    h, o = statistics.median(hand_step), statistics.median(ours_step)
    print(f"== {case} ({repeats} runs each)")
    print(f"graphs per step (hand-written): {graphs:.0f}; trnlens: {x['per_step']['graphs']}")
    print(f"per step: hand-written {h:.0f} µs, trnlens timing pass {o:.0f} µs: {o / h:.2f}x "
          f"(recorder's own cost {statistics.median(collection):.0f} µs per call)")  # fmt: skip
    hw, ow = statistics.median(hand_wall), statistics.median(ours_wall)
    print(
        f"whole run: hand-written {hw:.1f} s, trnlens profile {ow:.1f} s: {ow / hw:.2f}x "
        "(trnlens adds a profiled pass, the settling steps and the sites step)"
    )


def main(argv: list[str] | None = None) -> None:
    """``--quick``: one run of each case with few calls, to show the bench runs to its end."""
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    python = xla_venv() / "bin" / "python"
    if not python.exists():
        raise SystemExit("no xla venv: bash scripts/setup-xla.sh")
    print(f"load: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for case in QUICK_CASES if quick else CASES:
        measure(python, case, 1 if quick else REPEATS, 5 if quick else CALLS)


if __name__ == "__main__":
    main()
