"""The words for a multi-rank result, shared by the CLI, the lens, the hints and the report.

One place computes them so that every face says the same figure the same way (the agent's
``rankmerge`` computed the numbers; this only phrases them).
"""

from __future__ import annotations

from trnlens import units


def is_multi_rank(result: dict) -> bool:
    return bool(result.get("ranks")) and (result.get("world_size") or 0) > 1


def headline(result: dict) -> str | None:
    """``2 ranks · slowest rank 1 (+38%) · 24% in all_reduce``."""
    if not is_multi_rank(result):
        return None
    parts = [f"{result['world_size']} ranks"]
    slowest = result.get("slowest_rank")
    spread = result.get("rank_spread") or {}
    if slowest is not None:
        pct = spread.get("slowest_vs_others_pct")
        parts.append(f"slowest rank {slowest}" + (f" (+{pct:.0f}%)" if pct is not None else ""))
    top = top_collective(result)
    if top is not None and top.get("share_of_step") is not None:
        parts.append(f"{100 * top['share_of_step']:.0f}% in {top['name']}")
    return " · ".join(parts)


def top_collective(result: dict) -> dict | None:
    rows = result.get("collectives") or []
    return max(rows, key=lambda r: r.get("share_of_step") or 0) if rows else None


def collective_hint(row: dict) -> str:
    """A collective's line: ``all_reduce: wait r0 635 µs · r1 0 µs (of 4.2 ms, 3.6 ms)``."""
    per_rank = sorted(row.get("per_rank") or [], key=lambda p: p["rank"])
    waits = " · ".join(f"r{p['rank']} {units.duration(p['wait_per_step_us'])}" for p in per_rank)
    times = ", ".join(units.duration(p["time_per_step_us"]) for p in per_rank)
    return f"{row['name']}: wait {waits} (in it: {times} per step)"


def moved(row: dict) -> str | None:
    """What a collective moved: ``DDP's reducer, 1.1 MB per step: bucket 0 (ddp.module.4,
    ddp.module.2); bucket 1 (ddp.module.0)``, or FSDP2's sharded modules; None when unknown."""
    size = row.get("bytes_per_step")
    amount = f", {units.data_size(size)} per step" if size else ""
    if row.get("buckets"):
        buckets = "; ".join(
            f"bucket {b['index']} ({', '.join(b['modules'])})" for b in row["buckets"]
        )
        return f"DDP's reducer{amount}: {buckets}"
    if row.get("modules"):
        who = "FSDP2" if row.get("source") == "fsdp" else "modules"
        return f"{who}{amount}: {', '.join(row['modules'])}"
    return None
