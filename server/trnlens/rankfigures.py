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


def slowest_row(result: dict) -> dict | None:
    """The slowest rank's row of ``result["ranks"]`` (None for a single-rank run)."""
    if not is_multi_rank(result):
        return None
    slowest = result.get("slowest_rank")
    return next((r for r in result["ranks"] if r.get("rank") == slowest), None)


def slowest_view(result: dict) -> dict:
    """``result`` with the slowest rank's own figures (op time, CPU, dispatches, timing) in
    place of rank 0's: what an editor's one headline shows of a multi-rank run, labelled with
    the rank (see :func:`lens_text`)."""
    row = slowest_row(result)
    if row is None:
        return result
    view = dict(result)
    for key in ("cpu_time_per_step_us", "device_time_per_step_us", "dispatches_per_step"):
        if row.get(key) is not None:
            view[key] = row[key]
    if row.get("timing_median_us") is not None:
        view["timing"] = {**(result.get("timing") or {}), "median_us": row["timing_median_us"]}
    return view


def lens_text(result: dict) -> str | None:
    """``rank 1 of 2 (slowest, +38%) · 24% in all_reduce``: said once, before the slowest
    rank's figures (the lens's), so that no figure reads as the whole run's or as rank 0's."""
    if not is_multi_rank(result):
        return None
    slowest = result.get("slowest_rank")
    pct = (result.get("rank_spread") or {}).get("slowest_vs_others_pct")
    if slowest is None:
        parts = [f"rank 0 of {result['world_size']}"]
    else:
        extra = f", +{pct:.0f}%" if pct is not None else ""
        parts = [f"rank {slowest} of {result['world_size']} (slowest{extra})"]
    top = top_collective(result)
    if top is not None and top.get("share_of_step") is not None:
        parts.append(f"{100 * top['share_of_step']:.0f}% in {top['name']}")
    return " · ".join(parts)


def top_collective(result: dict) -> dict | None:
    rows = result.get("collectives") or []
    return max(rows, key=lambda r: r.get("share_of_step") or 0) if rows else None


HINT_CHARS = 43  # VS Code's editor.inlayHints.maximumLength: a longer hint is cut with "…"


def short_collective_hint(row: dict, suffix: str = "", limit: int = HINT_CHARS) -> str:
    """The collective's hint within ``limit`` characters: the rank that waited longest and for
    how long, of how long it was in the call (``all_reduce: r0 waits 1.36 ms of 5.77 ms``);
    every rank's figures go to the tooltip (:func:`collective_hint`)."""
    labels = collective_labels(row, suffix)
    return next((text for text in labels if len(text) <= limit), labels[-1])


def collective_labels(row: dict, suffix: str = "") -> list[str]:
    """The collective hint's labels, richest first, each ending with ``suffix``: the wait of
    the rank that waited longest is in every one."""
    per_rank = row.get("per_rank") or []
    if not per_rank:
        return [f"{row['name']}{suffix}"]
    worst = max(per_rank, key=lambda p: p.get("wait_per_step_us") or 0)
    wait = units.duration(worst.get("wait_per_step_us"))
    inside = units.duration(worst.get("time_per_step_us"))
    return [
        text + suffix
        for text in (
            f"{row['name']}: r{worst['rank']} waits {wait} of {inside}",
            f"{row['name']}: r{worst['rank']} waits {wait}",
            f"r{worst['rank']} waits {wait}",
        )
    ]


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
