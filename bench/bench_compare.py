"""Benchmark: does `compare` cry wolf? The same function compared with itself, N times, one run.

Each trial compares a function with an identical copy of itself, so the only right verdict is
"no measurable difference" (a speed-up range that contains 1.0). Two methods, in the same run
and on the same machine, trial by trial:
  - after (this branch): the agent's comparison: every variant from the same snapshot, timed in
    interleaved rounds, the range the 10th-90th percentiles of the per-round ratios
    (agent/rounds.py);
  - before (main's method, reimplemented here): each variant measured on its own, one after the
    other, with its own timing pass; the speed-up the ratio of the two medians and the range
    [baseline min / variant max, baseline max / variant min].
Figures: how often each method's range contains 1.0 (goal: at least 95% of trials for "after"),
the median and the worst width of the ranges (high / low), and how often and how far the median
speed-up strays from 1.00x (what the lens showed as a bare figure before, "fixed 0.56x").
``--load N`` runs N busy-looping processes during the trials (a busy machine; they are stopped
at the end); the machine's load average is printed.
Run: .venv/bin/python bench/bench_compare.py [--trials N] [--load N] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "server"))

from trnlens.agent import rounds  # noqa: E402
from trnlens.agent.runner import Runner  # noqa: E402

# A naive RMSNorm (six dispatches) on inputs small enough for many trials.
SOURCE = """
import torch


def inputs():
    return (torch.randn(4, 128, 512), torch.randn(512))


# trnlens: inputs=inputs
def naive(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
"""


def request(root: Path, variants: list[dict], repeats: int) -> dict:
    return {
        "backend": "cpu",
        "warmup": 2,
        "steps": 3,
        "repeats": repeats,
        "project_root": str(root),
        "variants": variants,
        "artifacts_dir": str(root / ".stage"),
        "options": {"lines": False, "trace": False, "timing_budget_s": 2.0},
    }


def run(req: dict) -> dict:
    return Runner(req, lambda _: None, lambda: False).run()


def after(root: Path, repeats: int) -> tuple[float, list[float]]:
    same = {"path": "m.py", "qualname": "naive"}
    outcome = run(request(root, [same, {**same, "label": "again"}], repeats))
    return outcome["speedups"][1], outcome["speedup_ranges"][1]


def before(root: Path, repeats: int) -> tuple[float, list[float]]:
    """main's method: two separate runs, each with its own timing pass, extremes paired."""
    same = [{"path": "m.py", "qualname": "naive"}]
    base = run(request(root, same, repeats))["timing"]
    other = run(request(root, same, repeats))["timing"]
    speedup = base["median_us"] / other["median_us"]
    return speedup, [base["min_us"] / other["max_us"], base["max_us"] / other["min_us"]]


def summary(name: str, found: list[tuple[float, list[float]]]) -> str:
    same = sum(rounds.contains_one(span) for _, span in found)
    widths = [span[1] / span[0] for _, span in found]
    worst = max(found, key=lambda f: abs(f[0] - 1.0))[0]
    off = sum(not 0.9 <= speedup <= 1.1 for speedup, _ in found)
    return (
        f"{name:<7} 'no measurable difference' in {same}/{len(found)} trials "
        f"({100 * same / len(found):.0f}%); range width (high/low) median "
        f"{statistics.median(widths):.2f}x, worst {max(widths):.2f}x; median speed-up "
        f"outside 0.90-1.10x in {off} trials, furthest from 1: {worst:.2f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=20, help="rounds / timing calls (20)")
    parser.add_argument("--load", type=int, default=0, help="busy-looping processes (0)")
    args = parser.parse_args()
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)
    ]
    try:
        with tempfile.TemporaryDirectory(prefix="trnlens-bench-compare-") as tmp:
            root = Path(tmp)
            (root / "m.py").write_text(SOURCE)
            run(request(root, [{"path": "m.py", "qualname": "naive"}], 5))  # warm the imports
            found_after, found_before = [], []
            for trial in range(args.trials):
                # alternate which method goes first: a slow spell weighs on both alike
                if trial % 2:
                    found_before.append(before(root, args.repeats))
                    found_after.append(after(root, args.repeats))
                else:
                    found_after.append(after(root, args.repeats))
                    found_before.append(before(root, args.repeats))
            load = os.getloadavg()[0]
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print(
        f"{args.trials} trials of naive RMSNorm (4, 128, 512) compared with itself, "
        f"{args.repeats} rounds/calls each; {args.load} busy processes; load average {load:.1f} "
        f"on {os.cpu_count()} cores"
    )
    print(summary("before", found_before))
    print(summary("after", found_after))
    share = sum(rounds.contains_one(span) for _, span in found_after) / len(found_after)
    print(f"goal: 'after' at least 95% -> {'met' if share >= 0.95 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
