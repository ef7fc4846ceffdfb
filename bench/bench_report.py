"""Benchmark: building the run report from a small and a 200 MB chrome trace.

Two synthetic traces in the shape torch's export_chrome_trace writes (made here, in a temp dir):
  - small: 5 profiled steps of the naive RMSNorm's six dispatches (about 100 events, a few kB);
  - large: 5 steps of about 180,000 ops each, padded to 200 MB (busy steps: 900,000 events).
For each, in a fresh process: the time to build the report (`report.build.write`), the page's
size, and the process's peak RSS; against the named baseline, `json.load` of the same trace in a
fresh process (what a reader that is not streamed would pay before drawing anything).
Run: .venv/bin/python bench/bench_report.py [--quick]
``--quick``: the large trace 2 MB (1,800 ops a step), to show the bench runs to its end.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OPS = ("aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::mul")
LARGE_BYTES = 200 * 1000 * 1000
RUN_ID = "20260101T000000-00000000"


def event(name: str, ts: float, index: int, pad: str) -> str:
    return (
        f',\n{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, '
        f'"ts": {ts:.3f}, "dur": 1.500, "args": {{"Input Dims": [[4, 512, 2048], []], '
        f'"Ev Idx": {index}, "Concrete Inputs": ["{pad}"]}}}}'
    )


def write_trace(path: Path, ops_per_step: int, target_bytes: int | None = None) -> int:
    """Five steps of `ops_per_step` dispatches each (cycling the naive RMSNorm's ops)."""
    with open(path, "w", encoding="utf-8") as out:
        out.write('{"schemaVersion": 1, "traceEvents": [\n')
        out.write(
            '{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}'
        )
        ts = 1000.0
        pad = ""
        if target_bytes:  # a long argument stands in for shapes and strides
            base = len(event("aten::mul", 1e9, 0, ""))
            pad = "x" * max(target_bytes // (5 * ops_per_step) - base, 0)
        for step in range(1, 6):
            start = ts
            events = []
            for i in range(ops_per_step):
                name = OPS[i % len(OPS)]
                events.append(event(name, ts, i, pad))
                ts += 2.0
            out.write("".join(events))
            out.write(
                f',\n{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", '
                f'"pid": 1, "tid": 1, "ts": {start - 0.5:.3f}, "dur": {ts - start + 1:.3f}}}'
            )
            ts += 50
        out.write("\n]}\n")
    return path.stat().st_size


def result() -> dict:
    return {
        "schema_version": 2, "run_id": RUN_ID, "created_at": "2026-01-01T00:00:00+00:00",
        "function": {"path": "m.py", "qualname": "rmsnorm_naive", "source_hash": None,
                     "unsaved": False, "line": 1, "end_line": 2},
        "variant": {"label": "rmsnorm_naive", "kind": "function", "source_hash": None},
        "target": "local", "host": "bench", "backend": "cpu", "device": "cpu", "time_basis": "cpu",
        "versions": {}, "git_commit": None, "mode": "inference", "inputs": None, "warmup": 1,
        "steps": 5, "dispatches_per_step": 6, "wall_time_per_step_us": 1.0,
        "cpu_time_per_step_us": 1.0, "device_time_per_step_us": 1.0, "peak_memory_bytes": None,
        "ops": [{"name": op, "calls": 1, "self_cpu_us": 1.0, "self_device_us": 1.0,
                 "cpu_total_us": 1.0, "device_total_us": 1.0, "input_shapes": []}
                for op in OPS[:5]],
        "lines": [{"path": "m.py", "line": 2, "cpu_us": 6.0, "device_us": 6.0, "dispatches": 6,
                   "ops": {op: 1 for op in OPS}}],
        "timing": None, "artifacts": [{"kind": "chrome_trace", "path": "trace.json"}],
        "warnings": [], "error": None,
    }  # fmt: skip


def child(kind: str, project: str) -> None:
    """One measurement in this (fresh) process; prints a JSON line."""
    sys.path.insert(0, str(REPO / "server"))
    root = Path(project)
    trace = root / ".trnlens" / "artifacts" / RUN_ID / "trace.json"
    from trnlens.report import build  # imported before the clock starts, like json
    from trnlens.store import Store

    started = time.perf_counter()
    if kind == "report":
        with Store(root) as store:
            built = build.write(store, [result()], root, root / "report.html", reuse=False)
        size = built.path.stat().st_size
    else:
        with open(trace, encoding="utf-8") as handle:
            size = len(json.load(handle)["traceEvents"])
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "size": size, "peak_mb": peak_mb}))


def measure(kind: str, project: Path) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(project)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(quick: bool) -> None:
    large = ("2 MB", 1_800, 2_000_000) if quick else ("200 MB", 180_000, LARGE_BYTES)
    print(
        f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="trnlens-bench-report-") as tmp:
        for name, ops, target in (("small", 6, None), large):
            project = Path(tmp) / name.replace(" ", "")
            run_dir = project / ".trnlens" / "artifacts" / RUN_ID
            run_dir.mkdir(parents=True)
            (project / "m.py").write_text("def rmsnorm_naive(x):\n    return x\n")
            trace_bytes = write_trace(run_dir / "trace.json", ops, target)
            report = measure("report", project)
            baseline = measure("json.load", project)
            rows.append((name, trace_bytes, report, baseline))
            (run_dir / "trace.json").unlink()  # 200 MB: not kept longer than needed
    head = (f"{'trace':>8} {'size':>9} | {'report build':>12} {'page':>8} {'peak RSS':>9} | "
            f"{'json.load':>9} {'peak RSS':>9} | {'time ratio':>10} {'RSS ratio':>9}")  # fmt: skip
    print(head)
    print("-" * len(head))
    for name, trace_bytes, report, baseline in rows:
        print(
            f"{name:>8} {trace_bytes / 1e6:>7.1f}MB | {report['seconds']:>11.2f}s "
            f"{report['size'] / 1e3:>6.0f}kB {report['peak_mb']:>7.0f}MB | "
            f"{baseline['seconds']:>8.2f}s {baseline['peak_mb']:>7.0f}MB | "
            f"{report['seconds'] / baseline['seconds']:>9.2f}x "
            f"{report['peak_mb'] / baseline['peak_mb']:>8.2f}x"
        )
    print(
        "report build: two streamed passes (ijson) over the trace, one step kept (at most "
        "5,000 events drawn); json.load: the whole trace in memory, nothing drawn yet"
    )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main("--quick" in sys.argv[1:])
