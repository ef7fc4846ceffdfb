"""Benchmark: what the pattern checks (agent/patterns.py) add to a profile run.

For each function, one in-process CPU run (torch imported once, warm-up 1, 5 profiled steps,
3 timed calls); the time spent in torch's pattern matcher (inside on_trace_ready) and in
trnlens's own checks is measured around those calls, and set against the whole variant's time
(import, inputs, every pass), the named baseline, measured in the same run.

Run: python bench/bench_findings.py [--quick]
``--quick``: each function once with short runs (two steps, nothing settled), to show the bench
runs to its end.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from trnlens.agent import patterns
from trnlens.agent.runner import Runner

REPO = Path(__file__).resolve().parents[1]
TRAIN = """import torch
from torch import nn


def step_inputs():
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.Flatten(),
                          nn.Linear(16 * 30 * 30, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    return (model, opt, torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,)))


# trnlens: inputs=step_inputs
def train_step(model, opt, x, y):
    opt.zero_grad(set_to_none=False)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def tiny_ops(x=torch.ones(4)):
    for _ in range(500):
        x = x + 1
    return x
"""
SPECS = [
    ("samples/rmsnorm.py", "rmsnorm_naive"),
    ("samples/attention.py", "naive_attention"),
    ("samples/llama_block.py", "DecoderBlock"),
    ("train.py", "train_step"),
    ("train.py", "tiny_ops"),
]


def timed(function, into: list):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            into.append(time.perf_counter() - start)

    return wrapper


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    matcher_s: list[float] = []
    checks_s: list[float] = []
    patterns.torch_matches = timed(patterns.torch_matches, matcher_s)
    patterns.check = timed(patterns.check, checks_s)  # measure.py calls them through the module
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copytree(REPO / "samples", root / "samples")
        (root / "train.py").write_text(TRAIN)
        for path, qualname in SPECS:
            matcher_s.clear()
            checks_s.clear()
            variant = {"path": path, "qualname": qualname}
            request = {"backend": "cpu", "warmup": 1, "steps": 2 if quick else 5,
                       "repeats": 2 if quick else 3, "project_root": str(root),
                       "variants": [variant], "artifacts_dir": str(root / ".stage"),
                       "options": {"settle_steps": 0} if quick else {}}  # fmt: skip
            result = Runner(request, lambda m: None, lambda: False).run()
            variant_ms = result["accounting"]["variant_us"] / 1000
            added_ms = 1000 * (sum(matcher_s) + sum(checks_s))
            rows.append(
                [f"{path}::{qualname}", f"{result['dispatches_per_step']:g}",
                 ",".join(f["id"] for f in result["findings"]) or "-",
                 f"{1000 * sum(matcher_s):.1f}", f"{1000 * sum(checks_s):.1f}",
                 f"{variant_ms:.0f}", f"{100 * added_ms / variant_ms:.1f}%"]
            )  # fmt: skip
    headers = ["function", "dispatches", "findings", "torch matcher ms", "own checks ms",
               "variant ms (baseline)", "added"]  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
