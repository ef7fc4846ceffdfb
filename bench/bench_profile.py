"""Benchmark: `trnlens profile` against a hand-written torch.profiler script doing the same work.

Prints, measured in one run, for a small and a large RMSNorm input:
  - wall time of `trnlens profile` (CLI, cold agent) vs the hand-written script (cold), and ratio
    (median of ``--runs`` cold runs of each);
  - the profiler's overhead: the profiled step / the plain synchronised step (the timing pass),
    both from trnlens's result, median over the runs with their range; and the same for trnlens
    as it was at ``--against REV`` (default: the merge base with main), extracted from git and run
    in the same loop, so that before and after share the machine's state;
  - `trnlens compare` speed-ups of the fused and compiled variants with their spread.
Run: .venv/bin/python bench/bench_profile.py [--runs 3] [--against REV]
``--quick``: one run of each, the small input only, against HEAD, to show the bench runs to its
end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_check import default_against, extract  # noqa: E402

SIZES = {"small": (4, 64, 256), "large": (4, 512, 2048)}
WARMUP, STEPS = 3, 5

MODULE = """
import torch


def inputs():
    return (torch.randn({shape}), torch.randn({dim}))


# trnlens: inputs=inputs
def naive(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


# trnlens: inputs=inputs
def fused(x, w, eps=1e-6):
    return torch.rms_norm(x, (x.shape[-1],), w, eps)
"""

HAND_WRITTEN = """
import torch
from torch.profiler import ProfilerActivity, profile, schedule
import model

x, w = model.inputs()
with torch.inference_mode():
    for _ in range({warmup}):
        model.naive(x, w)
    events = []
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active={steps}),
                 on_trace_ready=lambda p: (events.append(p.key_averages()),
                                           p.export_chrome_trace("trace.json"))) as prof:
        for _ in range({steps} + 1):
            model.naive(x, w)
            prof.step()
print(events[0].table(sort_by="self_cpu_time_total", row_limit=10))
"""


def _speedup(value: float, span: list[float]) -> str:
    return f"{value:.2f}x ({span[0]:.2f}-{span[1]:.2f})"


def timed(command: list[str], cwd: Path, env: dict | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True, env=env)
    return time.perf_counter() - started, done.stdout


def _overhead(result: dict) -> float:
    return result["wall_time_per_step_us"] / result["timing"]["median_us"]


def _ratio(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run, the small input")
    parser.add_argument("--runs", type=int, default=1 if quick else 3, help="cold runs of each")
    parser.add_argument("--against", default=None, help="git revision of the 'before' figures")
    args = parser.parse_args()
    against = args.against or default_against(quick)
    rows = []
    for label, shape in list(SIZES.items())[: 1 if quick else None]:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "project"
            root.mkdir()
            before_env = {**os.environ, "PYTHONPATH": str(extract(against, Path(tmp) / "before"))}
            (root / "model.py").write_text(
                textwrap.dedent(MODULE.format(shape=", ".join(map(str, shape)), dim=shape[-1]))
            )
            (root / "hand.py").write_text(
                textwrap.dedent(HAND_WRITTEN.format(warmup=WARMUP, steps=STEPS))
            )
            trn = [sys.executable, "-m", "trnlens"]
            common = ["--warmup", str(WARMUP), "--steps", str(STEPS), "--quiet"]
            profile = [*trn, "profile", "model.py::naive", *common, "--format", "json"]
            t_cli, t_hand, after, before, spreads = [], [], [], [], []
            for _ in range(args.runs):  # interleaved: before and after see the same load
                seconds, out = timed(profile, root)
                t_cli.append(seconds)
                result = json.loads(out)
                after.append(_overhead(result))
                spreads.append(result.get("stability") or {})
                before.append(_overhead(json.loads(timed(profile, root, before_env)[1])))
                t_hand.append(timed([sys.executable, "hand.py"], root)[0])
            t_cli_s, t_hand_s = statistics.median(t_cli), statistics.median(t_hand)
            _, out = timed(
                [*trn, "compare", "model.py::naive", "model.py::fused", "--compiled",
                 *common, "--format", "json"],
                root,
            )  # fmt: skip
            comparison = json.loads(out)
        plain = result["timing"]["median_us"]
        profiled = result["wall_time_per_step_us"]
        speedups = comparison["speedups"]
        ranges = comparison["speedup_ranges"]
        spread = [s.get("profiled_spread") for s in spreads if s.get("profiled_spread") is not None]
        rows.append(
            {
                "input": f"{label} {shape}",
                "trnlens profile (s)": f"{t_cli_s:.2f}",
                "hand-written script (s)": f"{t_hand_s:.2f}",
                "ratio": f"{t_cli_s / t_hand_s:.2f}x",
                "profiled step (ms)": f"{profiled / 1000:.3f}",
                "plain step (ms)": f"{plain / 1000:.3f}",
                "overhead before": _ratio(before),
                "overhead after": _ratio(after),
                "after/before": f"{statistics.median(after) / statistics.median(before):.2f}",
                "profiled spread": f"{statistics.median(spread):.0%}" if spread else "-",
                "dispatches naive/fused/compiled": "/".join(
                    f"{v['dispatches_per_step']:g}" for v in comparison["variants"]
                ),
                "fused speed-up (range)": _speedup(speedups[1], ranges[1]),
                "compiled speed-up (range)": _speedup(speedups[2], ranges[2]),
                "load (1 min)": f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
            }
        )
    headers = list(rows[0])
    widths = [max(len(h), *(len(r[h]) for r in rows)) for h in headers]
    print("trnlens profile vs a hand-written torch.profiler script (cold processes, CPU backend)")
    print("baseline: the hand-written script; trnlens also runs line attribution and a timing pass")
    print(
        f"overhead = profiled step / plain step, median (range) of {args.runs} runs; before = "
        f"{against[:10]}, after = this tree; profiled spread = (max - min) / median of steps"
    )
    for header_row in (headers, ["-" * w for w in widths]):
        print("  ".join(h.ljust(w) for h, w in zip(header_row, widths, strict=True)))
    for row in rows:
        print("  ".join(row[h].ljust(w) for h, w in zip(headers, widths, strict=True)))


if __name__ == "__main__":
    main()
