"""Benchmark: does `compare` cry wolf? The same function compared with itself, N times, one run.

Each trial compares a function with an identical copy of itself, so the only right verdict is
"no measurable difference". The verdict is the one every surface prints (trnlens.speedup.verdict:
a speed-up within 5% of 1.0, or a range that contains 1.0, is no measurable difference), on the
agent's comparison: every variant from the same snapshot, timed in interleaved rounds whose order
alternates (A B, B A, ...), the speed-up the ratio of the medians over those rounds and the
range the 10th-90th percentiles of the per-round ratios (agent/rounds.py).

One run, two halves, trial by trial on the same machine: quiet (nothing started by the bench),
then loaded (the bench starts ``--load`` busy-looping processes, 2 by default, for that half only
and stops them after it). Goal: at least 95% "no measurable difference" in EACH half.
Figures per half: that share, the median and the worst width of the ranges (high / low), how
often and how far the speed-up strays from 1.00x, and the load average.
``--before`` adds main's old method (each variant measured on its own, one pass after the other,
the range [baseline min / variant max, baseline max / variant min]) for reference.
Run: .venv/bin/python bench/bench_compare.py [--trials N] [--load N] [--repeats N] [--before]
``--quick``: one trial per half, 3 rounds, 1 busy process, main's old method too, to show the
bench runs to its end.
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

from trnlens import speedup  # noqa: E402
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


def same(found: tuple[float, list[float]]) -> bool:
    return speedup.verdict(*found) == speedup.SAME


def summary(name: str, found: list[tuple[float, list[float]]]) -> str:
    hits = sum(same(f) for f in found)
    widths = [span[1] / span[0] for _, span in found]
    worst = max(found, key=lambda f: abs(f[0] - 1.0))[0]
    off = sum(not 0.95 <= factor <= 1.05 for factor, _ in found)
    return (
        f"  {name:<7} 'no measurable difference' in {hits}/{len(found)} trials "
        f"({100 * hits / len(found):.0f}%); range width (high/low) median "
        f"{statistics.median(widths):.2f}x, worst {max(widths):.2f}x; speed-up outside "
        f"0.95-1.05x in {off} trials, furthest from 1: {worst:.2f}x"
    )


def half(root: Path, trials: int, repeats: int, with_before: bool) -> tuple[list, list, float]:
    found_after: list = []
    found_before: list = []
    for trial in range(trials):
        # alternate which method goes first: a slow spell weighs on both alike
        if with_before and trial % 2:
            found_before.append(before(root, repeats))
        found_after.append(after(root, repeats))
        if with_before and not trial % 2:
            found_before.append(before(root, repeats))
    return found_after, found_before, os.getloadavg()[0]


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one trial per half, --before")
    parser.add_argument("--trials", type=int, default=1 if quick else 20, help="per half (20)")
    parser.add_argument("--repeats", type=int, default=3 if quick else 20, help="rounds (20)")
    parser.add_argument("--load", type=int, default=1 if quick else 2, help="busy processes (2)")
    parser.add_argument("--before", action="store_true", help="also main's old method")
    args = parser.parse_args()
    args.before = args.before or quick
    halves = {}
    with tempfile.TemporaryDirectory(prefix="trnlens-bench-compare-") as tmp:
        root = Path(tmp)
        (root / "m.py").write_text(SOURCE)
        run(request(root, [{"path": "m.py", "qualname": "naive"}], 5))  # warm the imports
        halves["quiet"] = half(root, args.trials, args.repeats, args.before)
        burners = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)
        ]
        try:
            halves[f"loaded ({args.load} busy)"] = half(
                root, args.trials, args.repeats, args.before
            )
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
    print(
        f"{args.trials} trials per half of naive RMSNorm (4, 128, 512) compared with itself, "
        f"{args.repeats} rounds each, on {os.cpu_count()} cores; noise threshold "
        f"{100 * speedup.NOISE:.0f}%"
    )
    met = True
    for name, (found_after, found_before, load) in halves.items():
        share = sum(same(f) for f in found_after) / len(found_after)
        met = met and share >= 0.95
        print(f"{name}: load average {load:.1f}, 'no measurable difference' {100 * share:.0f}%")
        if found_before:
            print(summary("before", found_before))
        print(summary("after", found_after))
    print(f"goal: at least 95% quiet AND loaded, in this one run -> {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
