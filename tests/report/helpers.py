"""Small hand-made chrome traces (the shape torch's export_chrome_trace writes)."""

from __future__ import annotations

import json
from pathlib import Path


def op(name: str, ts: float, dur: float, cat: str = "cpu_op", dims=None, tid: int = 1) -> dict:
    args = {"Input Dims": dims} if dims is not None else {}
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def step(n: int, ts: float, dur: float) -> dict:
    return op(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")


def write_trace(path: Path, events: list[dict]) -> Path:
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": meta + events}))
    return path


def naive_step(n: int, ts: float, gap: float = 10.0) -> list[dict]:
    """A six-dispatch RMSNorm step: pow, mean (calling sum, div_), add, rsqrt, mul, mul."""
    events, t = [], ts + 5
    for name in ("aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::mul"):
        events.append(op(name, t, 100, dims=[[4, 512, 2048], []]))
        if name == "aten::mean":
            events.append(op("aten::sum", t + 5, 60))
            events.append(op("aten::div_", t + 70, 20))
        t += 100 + gap
    return [step(n, ts, t - ts), *events]
