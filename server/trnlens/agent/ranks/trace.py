"""Every rank's chrome trace in one file, on one time axis: open it in Perfetto and see the ranks
one above the other (what pytorch/pytorch#128292 asks for).

Each rank's ``trace.json`` keeps its times relative to its own ``baseTimeNanoseconds`` (wall
clock). Its events are moved onto rank 0's base (plus, for a rank on another host, minus the
clock offset measured at the barriers: see merge.py), and each process is named ``rank N``.
Traces are read whole (stdlib json, in the agent): above ``MAX_BYTES`` together the merged file
is not written and the result says so.
"""

from __future__ import annotations

import json
import os

MAX_BYTES = 64 * 1024 * 1024
NAME = "ranks-trace.json"


def write(work: str, ranks: list[dict]) -> tuple[dict | None, str | None]:
    """(artifact entry, None) or (None, why not). ``ranks``: the ranks' results, rank order."""
    paths = [os.path.join(work, f"rank-{r['rank']}", "trace.json") for r in ranks]
    if not all(os.path.isfile(p) for p in paths):
        return None, None  # traces off (options.trace false): nothing to merge, nothing to say
    size = sum(os.path.getsize(p) for p in paths)
    if size > MAX_BYTES:
        return None, (
            f"the ranks' chrome traces are {size / 1e6:.0f} MB together: no merged "
            f"{NAME} (each rank's trace is in rank-N/)"
        )
    host0 = (ranks[0].get("clock") or {}).get("host")
    merged: dict = {}
    events: list = []
    base0 = None
    for r, path in zip(ranks, paths, strict=True):
        with open(path, encoding="utf-8") as handle:
            trace = json.load(handle)
        base = int(trace.get("baseTimeNanoseconds") or 0)
        clock = r.get("clock") or {}
        if clock.get("host") and clock.get("host") != host0:
            base -= int((clock.get("offset_us") or 0.0) * 1000)
        if base0 is None:
            base0 = base
            merged = {k: v for k, v in trace.items() if k != "traceEvents"}
        shift_us = (base - base0) / 1000
        pids = set()
        for event in trace.get("traceEvents") or []:
            if event.get("ph") == "M" and event.get("name") in (
                "process_name",
                "process_sort_index",
            ):
                continue  # "python": replaced by the rank's name below
            if isinstance(event.get("ts"), (int, float)):
                event["ts"] = event["ts"] + shift_us
            pids.add(event.get("pid"))
            events.append(event)
        for pid in sorted(p for p in pids if isinstance(p, int)):
            events.append({"ph": "M", "name": "process_name", "pid": pid,
                           "args": {"name": f"rank {r['rank']}"}})  # fmt: skip
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid,
                           "args": {"sort_index": r["rank"]}})  # fmt: skip
    merged["traceEvents"] = events
    merged["baseTimeNanoseconds"] = base0
    merged["traceName"] = NAME
    target = os.path.join(work, NAME)
    with open(target, "w", encoding="utf-8") as handle:
        json.dump(merged, handle)
    return {"kind": "chrome_trace_ranks", "path": NAME}, None
