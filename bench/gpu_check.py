"""GPU check of the cuda backend (issue 16); the same checks run on the CPU for what they can.

On the backend chosen (``--backend auto``: cuda when torch sees a GPU, else cpu) it profiles, with
the real `trnlens` CLI into a temporary project:
  - the tutorial's three RMSNorm variants at (4, 512, 2048) in float32 and bfloat16 (naive,
    `torch.rms_norm`, `torch.compile`) as one `trnlens compare` each;
  - the Llama-style block from samples/llama_block.py (`trnlens profile`).
It prints per run: host-side dispatches and kernel launches per step, device time, CPU time and
wall clock per step, the idle gaps between device work per step (from the chrome trace), the
timing pass's median, peak memory; then four checks per run:
  1. device time per step is within 10% of the synchronised wall clock per step minus the gaps
     the trace shows (that is, the time the device was busy), else the difference is explained;
  2. the op table's self device times add up to the step's device time (no double count of host
     events and the kernels they launched);
  3. the per-line device times add up to the headline (eager code; compiled code has no lines);
  4. the memory pass's peak (torch's memory timeline, issue 41) is within 10% of the caching
     allocator's own peak for one step (``torch.cuda.max_memory_allocated``), and the run says
     the GPU's memory (its ``memory.limit_bytes``); on the CPU, not applicable (the CPU's
     ``peak_memory_bytes`` is the host's, another figure).
Exit status 1 when a check fails. `--json FILE` also writes every figure as JSON.

Run: .venv/bin/python bench/gpu_check.py [--backend auto|cpu|cuda] [--shape 4,512,2048]
On a GPU machine this is one short run (a few compiles): see the issue's note for its output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
TOLERANCE = {"busy": 0.10, "ops": 0.05, "lines": 0.05, "memory": 0.10}

NORMS = """
import torch


def float32(device):
    return (torch.randn({shape}, device=device), torch.randn({dim}, device=device))


def bfloat16(device):
    dtype = torch.bfloat16
    return (torch.randn({shape}, device=device, dtype=dtype),
            torch.randn({dim}, device=device, dtype=dtype))


def naive(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def fused(x, w, eps=1e-6):
    return torch.rms_norm(x, (x.shape[-1],), w, eps)
"""


# -- reading a run's chrome trace ---------------------------------------------------------------
def _union_us(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def trace_steps(trace: dict, time_basis: str) -> list[dict]:
    """Per profiled step: wall clock, time the device was busy, idle gaps, device events.

    Busy time is the union of device work inside the step: CUDA kernels and copies on the
    ``cuda`` backend; on the ``cpu`` backend (the host is the device) the ops and compiled
    regions of the thread that ran the step.
    """
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]
    steps = sorted(
        (e for e in events if str(e.get("name", "")).startswith("ProfilerStep")),
        key=lambda e: e["ts"],
    )
    out = []
    for step in steps:
        start, stop = step["ts"], step["ts"] + step["dur"]

        def inside(e, start=start, stop=stop):
            return start <= e["ts"] and e["ts"] + e["dur"] <= stop + 1.0

        if time_basis == "cpu":
            work = [
                e
                for e in events
                if e is not step
                and e.get("tid") == step.get("tid")
                and e.get("cat") in {"cpu_op", "user_annotation"}
                and inside(e)
            ]
        else:
            work = [e for e in events if e.get("cat") in DEVICE_CATEGORIES and inside(e)]
        busy = _union_us([(e["ts"], e["ts"] + e["dur"]) for e in work])
        device_events = [e for e in work if e.get("cat") in DEVICE_CATEGORIES]
        out.append(
            {
                "wall_us": step["dur"],
                "busy_us": busy,
                "gaps_us": step["dur"] - busy,
                "device_events": len(device_events),
            }
        )
    return out


# -- the checks ---------------------------------------------------------------------------------
# How the agent turns the active steps into its headline figure (the median, issue 22). The op
# table is per-step totals over all the steps (a mean), so the ops are checked against the mean.
per_step_statistic = statistics.median


def _within(value: float, reference: float, tolerance: float) -> bool:
    if reference == 0:
        return value == 0
    return abs(value - reference) / reference <= tolerance


def check_run(result: dict, steps: list[dict]) -> list[dict]:
    """The three checks of one run: each ``{"name", "ok", "detail"}`` (ok None: not applicable)."""
    device = result["device_time_per_step_us"] or 0.0
    checks = []
    kept = (result.get("profiled_timing") or {}).get("kept_steps")
    all_steps = steps
    if kept and all(0 <= i < len(steps) for i in kept):
        # the headline's medians leave out steps that faulted in memory the profiler displaced
        steps = [steps[i] for i in kept]
    if steps:
        # The same statistic over steps as the headline figure (its mean over the active steps):
        # one slow step on a busy machine moves a mean far from a median.
        busy = per_step_statistic(s["busy_us"] for s in steps)
        wall = per_step_statistic(s["wall_us"] for s in steps)
        ok = _within(device, busy, TOLERANCE["busy"])
        detail = (
            f"device {device:.1f} us vs wall {wall:.1f} - gaps {wall - busy:.1f} = {busy:.1f} us"
        )
        if not ok:
            detail += (
                " (device time above busy time: overlapping streams or a double count; below:"
                " device work the profiler did not attribute to a host op)"
            )
        checks.append({"name": "device time = wall - gaps", "ok": ok, "detail": detail})
    else:
        checks.append({"name": "device time = wall - gaps", "ok": False, "detail": "no steps"})
    ops_sum = sum(op["self_device_us"] for op in result["ops"])
    mean = statistics.fmean(s["busy_us"] for s in all_steps) if all_steps else device
    checks.append(
        {
            "name": "ops add up",
            "ok": _within(ops_sum, mean, TOLERANCE["ops"]),
            "detail": f"sum of self device {ops_sum:.1f} us vs the steps' mean busy {mean:.1f} us",
        }
    )
    if result.get("variant", {}).get("kind") == "compiled" or not result["lines"]:
        checks.append({"name": "lines add up", "ok": None, "detail": "no per-line figures"})
    else:
        lines_sum = sum(line["device_us"] for line in result["lines"])
        # Lines are put on the basis of the headline the lens shows (agent/basis.py): the
        # unprofiled median when the profiler inflated the steps.
        scale = result.get("time_scale") or {}
        total = scale.get("total_us") or device
        basis = "unprofiled median" if scale.get("basis") == "unprofiled" else "headline"
        checks.append(
            {
                "name": "lines add up",
                "ok": _within(lines_sum, total, TOLERANCE["lines"]),
                "detail": f"sum of lines {lines_sum:.1f} us vs {basis} {total:.1f} us",
            }
        )
    checks.append(memory_check(result))
    return checks


def memory_check(result: dict) -> dict:
    """The memory pass's peak against the caching allocator's, on CUDA (issue 41, point 7)."""
    name = "memory pass = allocator peak"
    memory = result.get("memory") or {}
    if result.get("backend") != "cuda":
        return {"name": name, "ok": None, "detail": f"on {result.get('backend')}: CUDA only"}
    if not memory:
        return {"name": name, "ok": False, "detail": "no memory pass on cuda"}
    allocator = result.get("peak_memory_bytes") or 0
    peak = memory.get("peak_bytes") or 0
    limit = memory.get("limit_bytes")
    ok = _within(peak, allocator, TOLERANCE["memory"]) and bool(limit)
    detail = (
        f"memory pass {peak / 1e6:.2f} MB ({memory.get('peak_phase')}) vs max_memory_allocated "
        f"{allocator / 1e6:.2f} MB; the GPU's memory {(limit or 0) / 1e9:.1f} GB"
    )
    return {"name": name, "ok": ok, "detail": detail}


# -- running trnlens ----------------------------------------------------------------------------
def _trnlens(root: Path, args: list[str], backend: str) -> dict:
    command = [sys.executable, "-m", "trnlens", *args, "--backend", backend]
    command += ["--format", "json", "--quiet"]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if not done.stdout.strip():
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _summarise(label: str, result: dict, root: Path) -> dict:
    if result.get("error"):
        return {"label": label, "error": result["error"]["message"], "checks": []}
    trace_path = root / ".trnlens" / "artifacts" / result["run_id"] / "trace.json"
    trace = json.loads(trace_path.read_text()) if trace_path.exists() else {}
    steps = trace_steps(trace, result["time_basis"])
    return {
        "label": label,
        "backend": result["backend"],
        "device": result["device"],
        "dispatches": result["dispatches_per_step"],
        "kernels": result.get("kernel_launches_per_step"),
        "device_us": result["device_time_per_step_us"],
        "cpu_us": result["cpu_time_per_step_us"],
        "wall_us": result["wall_time_per_step_us"],
        "gaps_us": per_step_statistic(s["gaps_us"] for s in steps) if steps else None,
        "median_us": (result.get("timing") or {}).get("median_us"),
        "peak_bytes": result.get("peak_memory_bytes"),
        "warnings": result.get("warnings", []),
        "checks": check_run(result, steps),
    }


def run_all(root: Path, backend: str, shape: tuple[int, ...]) -> list[dict]:
    (root / "norms.py").write_text(
        NORMS.format(shape=", ".join(map(str, shape)), dim=shape[-1]), encoding="utf-8"
    )
    shutil.copy(REPO / "samples" / "llama_block.py", root / "llama_block.py")
    rows = []
    for dtype in ("float32", "bfloat16"):
        outcome = _trnlens(
            root,
            ["compare", "norms.py::naive", "norms.py::fused", "--compiled", "--inputs", dtype],
            backend,
        )
        for result, speedup in zip(outcome["variants"], outcome["speedups"], strict=True):
            label = f"{result['variant']['label']} [{dtype}]"
            row = _summarise(label, result, root)
            row["speedup"] = speedup
            rows.append(row)
    block = _trnlens(root, ["profile", "llama_block.py::DecoderBlock"], backend)
    rows.append(_summarise("DecoderBlock (samples/llama_block.py)", block, root))
    return rows


def _us(value) -> str:
    return "-" if value is None else f"{value / 1000:.3f}"


def render(rows: list[dict]) -> str:
    headers = ["run", "disp", "kern", "dev ms", "cpu ms", "wall ms", "gaps ms", "median ms",
               "speed-up", "peak MB"]  # fmt: skip
    table = [headers]
    for row in rows:
        if "error" in row:
            table.append([row["label"], "error: " + row["error"][:60]] + [""] * 8)
            continue
        speedup = row.get("speedup")
        table.append(
            [
                row["label"],
                f"{row['dispatches']:g}" if row["dispatches"] is not None else "-",
                f"{row['kernels']:g}" if row["kernels"] is not None else "-",
                _us(row["device_us"]),
                _us(row["cpu_us"]),
                _us(row["wall_us"]),
                _us(row["gaps_us"]),
                _us(row["median_us"]),
                f"{speedup:.2f}x" if speedup else "-",
                "-" if row["peak_bytes"] is None else f"{row['peak_bytes'] / 1e6:.1f}",
            ]
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(r, widths, strict=True))) for r in table]  # fmt: skip
    lines.append("")
    for row in rows:
        for check in row["checks"]:
            mark = {True: "ok  ", False: "FAIL", None: "n/a "}[check["ok"]]
            lines.append(f"{mark} {row['label']}: {check['name']}: {check['detail']}")
        for warning in row.get("warnings", []):
            lines.append(f"     {row['label']}: warning: {warning}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--shape", default="4,512,2048", help="RMSNorm input shape (4,512,2048)")
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    shape = tuple(int(n) for n in args.shape.split(","))
    with tempfile.TemporaryDirectory(prefix="trnlens-gpu-check-") as tmp:
        rows = run_all(Path(tmp), args.backend, shape)
    print(f"gpu_check: backend {rows[0].get('backend')}, device {rows[0].get('device')}, "
          f"RMSNorm input {shape}, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    failed = [c for row in rows for c in row["checks"] if c["ok"] is False]
    failed += [row for row in rows if "error" in row]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
