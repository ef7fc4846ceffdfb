"""The words for a multi-rank result, shared by the CLI, the lens, the hints and the report.

One place computes them so that every face says the same figure the same way (the agent's
``rankmerge`` computed the numbers; this only phrases them).
"""

from __future__ import annotations

from trnlens import units


def is_multi_rank(result: dict) -> bool:
    return bool(result.get("ranks")) and (result.get("world_size") or 0) > 1


def headline(result: dict) -> str | None:
    """``2 ranks · slowest rank 1 (busy +38%, wall +1%) · 24% in all_reduce``."""
    if not is_multi_rank(result):
        return None
    parts = [f"{result['world_size']} ranks"]
    slowest = result.get("slowest_rank")
    if slowest is not None:
        compared = versus_others(result)
        parts.append(f"slowest rank {slowest}" + (f" ({compared})" if compared else ""))
    top = top_collective(result)
    if top is not None and top.get("share_of_step") is not None:
        parts.append(f"{100 * top['share_of_step']:.0f}% in {top['name']}")
    return " · ".join(parts)


def versus_others(result: dict) -> str:
    """``busy +68%, wall +1%``: the slowest rank against the other ranks' median, named by what
    is compared. Busy time (wall minus the wait in collectives) names the slowest rank: ranks
    that wait for each other end their steps together, so their wall times agree (7.27 and
    7.20 ms) while one of them did 68% more work. "" when the run has no such figures."""
    found = []
    busy = (result.get("rank_spread") or {}).get("slowest_vs_others_pct")
    if busy is not None:
        found.append(f"busy {_signed(busy)}")
        wall = _slowest_vs_others(result, "wall_time_per_step_us")
        if wall is not None:
            found.append(f"wall {_signed(wall)}")
    return ", ".join(found)


def _slowest_vs_others(result: dict, key: str) -> float | None:
    """The slowest rank's ``key`` against the other ranks' median, in percent."""
    slowest = result.get("slowest_rank")
    rows = [r for r in result.get("ranks") or [] if r.get(key) is not None]
    mine = [r[key] for r in rows if r.get("rank") == slowest]
    others = sorted(r[key] for r in rows if r.get("rank") != slowest)
    if not mine or not others:
        return None
    middle = len(others) // 2
    reference = others[middle] if len(others) % 2 else (others[middle - 1] + others[middle]) / 2
    return (mine[0] / reference - 1) * 100 if reference else None


_signed = units.signed_pct  # +68%, −1%, ±0%: as the lens's other changes


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
    """``rank 1 of 2 (slowest: busy +38%, wall +1%) · 24% in all_reduce``: said once, before
    the slowest rank's figures (the lens's), so that no figure reads as the whole run's or as
    rank 0's; what is compared named (:func:`versus_others`)."""
    if not is_multi_rank(result):
        return None
    slowest = result.get("slowest_rank")
    if slowest is None:
        parts = [f"rank 0 of {result['world_size']}"]
    else:
        compared = versus_others(result)
        extra = f": {compared}" if compared else ""
        parts = [f"rank {slowest} of {result['world_size']} (slowest{extra})"]
    top = top_collective(result)
    if top is not None and top.get("share_of_step") is not None:
        parts.append(f"{100 * top['share_of_step']:.0f}% in {top['name']}")
    return " · ".join(parts)


def nearest_limit_words(result: dict) -> str | None:
    """``rank 1 nearest its memory limit: peak 3.3 MB of 15.6 GB (0.02%, the host's memory,
    shared by the processes on it); the others' median 3.2 MB``: the rank that runs out of
    memory first (agent/ranks/merge.py), or the highest peak where no limit is known."""
    found = result.get("memory_nearest_limit") if is_multi_rank(result) else None
    if not isinstance(found, dict):
        return None
    size = units.data_size
    others = f"; the others' median {size(found['others_median_bytes'])}"
    if found.get("limit_bytes"):
        share = 100 * (found.get("share_of_limit") or 0)
        basis = f", {found['limit_basis']}" if found.get("limit_basis") else ""
        return (
            f"rank {found['rank']} nearest its memory limit: peak {size(found['peak_bytes'])} "
            f"of {size(found['limit_bytes'])} ({_share(share)}{basis}){others}"
        )
    return f"rank {found['rank']} has the highest memory peak: {size(found['peak_bytes'])}{others}"


def _share(pct: float) -> str:
    """``42%``, ``0.02%``, ``<0.01%``: a share of a limit small enough to be read as none."""
    if pct >= 10:
        return f"{pct:.0f}%"
    if pct >= 0.01:
        return f"{pct:.2g}%"
    return "<0.01%"


def peak_label(result: dict) -> tuple[int, int] | None:
    """(rank, peak bytes) of the rank nearest its memory limit: the peak an editor's one
    headline shows of a multi-rank run, with its rank (None: a single rank, or none measured)."""
    found = result.get("memory_nearest_limit") if is_multi_rank(result) else None
    if not isinstance(found, dict):
        return None
    return found["rank"], found["peak_bytes"]


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
