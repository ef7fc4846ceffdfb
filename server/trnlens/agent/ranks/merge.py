"""N ranks' results -> one result: per-rank figures, the slowest rank, collectives, stragglers.

Pure (dicts in, dict out; no torch), so it is tested on hand-made ranks as well as real runs.

- Wait in a collective (the TensorBoard plugin's "synchronizing" time): the n-th call of a
  collective at a line is the same operation on every rank; the fastest rank's duration is the
  transfer, and each rank's excess over it is time spent waiting for the others.
- Busy time per step = wall time per step - that wait: what the rank itself needed. The slowest
  rank is the one with the most busy time; ``+N%`` compares it with the median of the others.
- Stragglers (HTA's ``find_stragglers_with_late_start_comm_kernels``): among the collective calls
  longer than 1% of a step, take the last one of each name in every step; keep the name whose
  duration varies most across ranks; a rank's metric in a step is how late it started that call
  (a blocking collective ends at about the same time everywhere, so the later a rank starts it,
  the more it delayed the others); per step the latest-starting rank counts once. HTA keeps the
  top 2 per iteration by default; with 2 ranks that flags both, so we keep the top 1.
- One time axis: each rank's profile starts at a wall-clock time (``trace_start_unix_us``). On one
  host the ranks share the clock; across hosts the offset to rank 0 measured at barrier exits
  (``clock.offset_us``) is subtracted, good to about the barrier's exit skew (``spread_us``).
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict

from .. import overlap

STRAGGLER_MIN_SHARE = 0.01  # HTA's min_normalized_duration


def merge(run_id: str, ranks: list[dict]) -> dict:
    ranks = sorted(ranks, key=lambda r: r["rank"])
    base = {k: v for k, v in ranks[0].items() if k not in _PER_RANK_ONLY}
    base["run_id"] = run_id
    base["world_size"] = len(ranks)
    base["nproc_per_node"] = len(ranks)
    base["dist_backend"] = ranks[0].get("dist_backend")
    base["artifacts"] = [
        {**a, "path": f"rank-{r['rank']}/{a['path']}", "rank": r["rank"]}
        for r in ranks
        for a in r.get("artifacts") or []
    ]
    steps = min(len((r.get("rank_timeline") or {}).get("steps") or []) for r in ranks)
    calls = _matched_calls(ranks, steps)
    base["ranks"] = [_rank_row(r, calls, steps) for r in ranks]
    base["collectives"] = _collective_rows(calls, ranks, steps)
    base["slowest_rank"], base["rank_spread"] = _slowest(base["ranks"])
    base["memory_nearest_limit"] = nearest_limit(base["ranks"])
    if isinstance(base.get("memory"), dict):  # the memory figures above the ranks are rank 0's
        base["memory"] = {**base["memory"], "rank": ranks[0]["rank"]}
    base["stragglers"] = stragglers(ranks, calls, steps)
    base["alignment"] = _alignment(ranks)
    base["rank_timelines"] = _aligned(ranks, base["alignment"])
    warnings = list(base.get("warnings") or [])
    # What only another rank saw is said with its rank; a kind of warning rank 0 has too (the
    # same opening words, other figures: "the machine is busy (load ...") is said once.
    kinds = {_kind(w) for w in warnings}
    for r in ranks[1:]:
        for w in r.get("warnings") or []:
            if _kind(w) not in kinds:
                kinds.add(_kind(w))
                warnings.append(f"rank {r['rank']}: {w}")
    strag = base["stragglers"]
    ranking = strag.get("ranking") or []
    if ranking and not strag.get("trusted"):
        warnings.append(
            f"the straggler ranking (HTA's late start of {strag['collective']['name']}) is not "
            f"to be trusted here: the ranks ended that collective up to "
            f"{strag['end_spread_us'] / 1000:.1f} ms apart (median over steps), as far apart as "
            "they started it; the method assumes they end together (ranks sharing too few "
            "cores, or a busy machine, break that)"
        )
    elif ranking and base["slowest_rank"] is not None and ranking[0] != base["slowest_rank"]:
        warnings.append(
            f"the straggler ranking (late start, HTA) puts rank {ranking[0]} first but busy "
            f"time names rank {base['slowest_rank']}: the ranks differ less than the noise"
        )
    base["warnings"] = warnings
    return base


def _kind(warning: str) -> str:
    """A warning's words before its first figure: what kind of warning it is."""
    return re.split(r"\d", warning, maxsplit=1)[0]


_PER_RANK_ONLY = ("rank_timeline", "rank", "local_rank", "clock", "dist_backend")


def _matched_calls(ranks: list[dict], steps: int) -> dict:
    """(step, name, path, line, n-th such call in the step) -> {rank: call}."""
    matched: dict = defaultdict(dict)
    for r in ranks:
        seen: dict = defaultdict(int)
        for call in (r.get("rank_timeline") or {}).get("collectives") or []:
            if call["step"] >= steps:
                continue
            key = (call["step"], call["name"], call.get("path"), call.get("line"))
            matched[key + (seen[key],)][r["rank"]] = call
            seen[key] += 1
    return {k: v for k, v in matched.items() if len(v) == len(ranks)}


def _waits(calls: dict) -> dict:
    """key -> {rank: wait µs}: each rank's duration minus the fastest rank's."""
    out = {}
    for key, by_rank in calls.items():
        fastest = min(c["dur_us"] for c in by_rank.values())
        out[key] = {rank: c["dur_us"] - fastest for rank, c in by_rank.items()}
    return out


def _per_step(r: dict, calls: dict, waits: dict, steps: int, only=None) -> list[dict]:
    """Each profiled step of rank ``r``: its wall time; the time with a collective in flight,
    the part spent waiting for the others and the part no compute hid (each a union of
    intervals: DDP's buckets in flight together count once); bytes moved and the transfer time
    (time minus wait, call by call) they took. ``only`` keeps the calls of one (name, path,
    line)."""
    spans = (r.get("rank_timeline") or {}).get("steps") or []
    rank = r["rank"]
    out = []
    for step in range(steps):
        keys = [k for k in calls if k[0] == step and (only is None or k[1:4] == only)]
        mine = [(calls[k][rank], waits[k][rank]) for k in keys]
        inside = _length((c["start_us"], c["start_us"] + c["dur_us"]) for c, _ in mine)
        waiting = _length((c["start_us"], c["start_us"] + w) for c, w in mine if w > 0)
        exposed = _length(tuple(p) for c, _ in mine for p in c.get("exposed") or ())
        sized = [(c["bytes"], c["dur_us"] - w) for c, w in mine if c.get("bytes")]
        out.append({
            "wall": spans[step][1] - spans[step][0], "in": inside, "wait": waiting,
            "exposed": exposed if any("exposed" in c for c, _ in mine) else None,
            "bytes": sum(b for b, _ in sized), "transfer": sum(t for _, t in sized),
        })  # fmt: skip
    return out


def _length(intervals) -> float:
    return sum(b - a for a, b in overlap.merge([i for i in intervals if i[1] > i[0]]))


def _median(values) -> float:
    values = list(values)
    return statistics.median(values) if values else 0.0


def _optional_median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _bandwidth(per_step: list[dict]) -> float | None:
    """Algorithm bandwidth in GB/s (nccl-tests' algbw): bytes over the transfer time (the
    calls' time less their wait), all steps together."""
    size = sum(p["bytes"] for p in per_step)
    transfer = sum(p["transfer"] for p in per_step)
    return size / transfer / 1e3 if size and transfer > 0 else None


def _median_step(per_step: list[dict]) -> dict:
    """The step whose wall time is the median (the lower middle one of an even count): its wall,
    collectives, wait and exposed part are read together, so that busy = wall − wait holds in
    the row (the medians of each column taken apart need not subtract)."""
    if not per_step:
        return {"wall": 0.0, "in": 0.0, "wait": 0.0, "exposed": None}
    ordered = sorted(per_step, key=lambda s: s["wall"])
    return ordered[(len(ordered) - 1) // 2]


def _rank_row(r: dict, calls: dict, steps: int) -> dict:
    """The rank's median step by wall time, read from this rank's profile (one clock): the
    step's span (ProfilerStep), its time in collectives, its wait, and wall minus wait."""
    per_step = _per_step(r, calls, _waits(calls), steps)
    median = _median_step(per_step)  # one step's columns, read together
    timing = r.get("timing") or {}
    return {
        "rank": r["rank"],
        "local_rank": r.get("local_rank", r["rank"]),
        "host": r.get("host"),
        "wall_time_per_step_us": median["wall"],
        "cpu_time_per_step_us": r.get("cpu_time_per_step_us"),
        "device_time_per_step_us": r.get("device_time_per_step_us"),
        "dispatches_per_step": r.get("dispatches_per_step"),
        "collective_time_per_step_us": median["in"],
        "collective_wait_per_step_us": median["wait"],
        "collective_exposed_per_step_us": median.get("exposed"),
        "collective_bytes_per_step": _median(p["bytes"] for p in per_step),
        "collective_bandwidth_gbps": _bandwidth(per_step),
        "busy_time_per_step_us": median["wall"] - median["wait"],
        "timing_median_us": timing.get("median_us"),
        # CUDA: communication kernels overlapped by compute, and the exposed rest (overlap.py)
        **((r.get("rank_timeline") or {}).get("overlap") or {}),
        **_memory_columns(r),
    }


def _memory_columns(r: dict) -> dict:
    """The rank's memory peak, growth a step and its device's limit, from its memory pass (None
    where the pass did not run or failed: the lines pass's host peak is another figure, and a
    rank said beside the others by it would be compared wrongly)."""
    found = r.get("memory")
    memory: dict = found if isinstance(found, dict) else {}
    return {
        "peak_memory_bytes": memory.get("peak_bytes"),
        "memory_growth_per_step_bytes": memory.get("growth_per_step_bytes"),
        "memory_limit_bytes": memory.get("limit_bytes"),
        "memory_limit_basis": memory.get("limit_basis"),
    }


def nearest_limit(rows: list[dict]) -> dict | None:
    """The rank that runs out of memory first: the highest peak over its device's limit, or the
    highest peak where a rank's limit is unknown (``basis`` says which). None unless every rank
    measured its peak (a rank whose pass failed says so in the warnings). Ranks that share a
    host share its RAM: each one's share of it is still what it alone holds (the limit is said
    with its basis)."""
    peaks = [row for row in rows if isinstance(row.get("peak_memory_bytes"), int)]
    if len(peaks) < 2 or len(peaks) < len(rows):  # a rank without its pass could be the one
        return None
    limited = all(isinstance(row.get("memory_limit_bytes"), int) and row["memory_limit_bytes"] > 0
                  for row in peaks)  # fmt: skip

    def fill(row: dict) -> float:
        return row["peak_memory_bytes"] / row["memory_limit_bytes"] if limited else 0.0

    top = max(peaks, key=lambda row: (fill(row), row["peak_memory_bytes"], -row["rank"]))
    others = sorted(row["peak_memory_bytes"] for row in peaks if row is not top)
    return {
        "rank": top["rank"],
        "peak_bytes": top["peak_memory_bytes"],
        "limit_bytes": top["memory_limit_bytes"] if limited else None,
        "share_of_limit": fill(top) if limited else None,
        "limit_basis": top.get("memory_limit_basis") if limited else None,
        "others_median_bytes": others[(len(others) - 1) // 2],
        "basis": "peak over the device's memory"
        if limited
        else "the highest peak (a rank's device memory is not known)",
    }


def _collective_rows(calls: dict, ranks: list[dict], steps: int) -> list[dict]:
    """Per collective line, per rank: medians over the steps of its time, wait and exposed
    part, and the share of the step it took (median over steps, mean over ranks); the modules
    it moved (DDP's buckets, FSDP2's sharded modules) and its bytes."""
    waits = _waits(calls)
    sites = sorted({k[1:4] for k in calls}, key=str)
    out = []
    for name, path, line in sites:
        per_rank, shares = [], []
        for r in ranks:
            per_step = _per_step(r, calls, waits, steps, only=(name, path, line))
            per_rank.append({
                "rank": r["rank"],
                "time_per_step_us": _median(p["in"] for p in per_step),
                "wait_per_step_us": _median(p["wait"] for p in per_step),
                "exposed_per_step_us": _optional_median(p["exposed"] for p in per_step),
                "bandwidth_gbps": _bandwidth(per_step),
            })  # fmt: skip
            shares.append(_median(p["in"] / p["wall"] for p in per_step if p["wall"] > 0))
        mine = [k for k in calls if k[1:4] == (name, path, line)]
        count = len(mine)
        first = [calls[k][ranks[0]["rank"]] for k in sorted(mine)]
        compiled = any(c.get("compiled") for k in mine for c in calls[k].values())
        sizes = [c["bytes"] for c in first if c.get("bytes")]
        row = {
            "name": name, "path": path, "line": line, "compiled": compiled,
            "calls_per_step": count / max(steps, 1),
            "share_of_step": statistics.fmean(shares) if shares else None,
            "source": first[0].get("source") if first else None,
            "bytes_per_step": sum(sizes) / max(steps, 1) if sizes else None,
            "per_rank": per_rank,
        }  # fmt: skip
        modules = _modules(first)
        if modules:
            row["modules"] = modules
        buckets = {c["bucket"]: c for c in first if c.get("bucket") is not None}
        if buckets:
            row["buckets"] = [{"index": i, "bytes": c.get("bytes"), "modules": c["modules"]}
                              for i, c in sorted(buckets.items())]  # fmt: skip
        out.append(row)
    return sorted(out, key=lambda row: -(row["share_of_step"] or 0))


def _modules(calls: list[dict]) -> list[str]:
    seen: list[str] = []
    for call in calls:
        for name in call.get("modules") or ():
            if name not in seen:
                seen.append(name)
    return seen


def _slowest(rows: list[dict]) -> tuple[int | None, dict | None]:
    if len(rows) < 2:
        return None, None
    busy = {row["rank"]: row["busy_time_per_step_us"] for row in rows}
    slowest = max(busy, key=lambda rank: busy[rank])
    others = [v for k, v in busy.items() if k != slowest]
    reference = statistics.median(others)
    low, high = min(busy.values()), max(busy.values())
    walls = [row["wall_time_per_step_us"] for row in rows]
    return slowest, {
        "basis": "busy time per step (wall time minus the wait in collectives)",
        "slowest_vs_others_pct": (busy[slowest] / reference - 1) * 100 if reference else None,
        "busy_min_us": low,
        "busy_max_us": high,
        "busy_spread_pct": (high / low - 1) * 100 if low else None,
        "wall_min_us": min(walls),
        "wall_max_us": max(walls),
    }


def stragglers(ranks: list[dict], calls: dict, steps: int) -> dict:
    method = "hta-late-start"
    walls = [r.get("wall_time_per_step_us") or 0.0 for r in ranks]
    threshold = statistics.fmean(walls) * STRAGGLER_MIN_SHARE if walls else 0.0
    # the last long call of each name in each step, per rank
    last: dict = {}
    for key, by_rank in calls.items():
        step, name = key[0], key[1]
        if not all(c["dur_us"] >= threshold for c in by_rank.values()):
            continue
        previous = last.get((step, name))
        if previous is None or _start(previous) < _start(by_rank):
            last[(step, name)] = by_rank
    if not last:
        return {"method": method, "collective": None, "ranking": [], "per_rank": []}
    spread: dict = defaultdict(list)
    for (_, name), by_rank in last.items():
        durs = [c["dur_us"] for c in by_rank.values()]
        spread[name].append(statistics.pstdev(durs))
    chosen = max(spread, key=lambda name: statistics.fmean(spread[name]))
    offsets = {r["rank"]: _origin(r, _host0(ranks)) for r in ranks}
    late: dict = defaultdict(list)
    flagged: dict = defaultdict(int)
    end_spreads = []
    for (_, name), by_rank in sorted(last.items()):
        if name != chosen:
            continue
        starts = {rank: offsets[rank] + c["start_us"] for rank, c in by_rank.items()}
        ends = [offsets[rank] + c["start_us"] + c["dur_us"] for rank, c in by_rank.items()]
        end_spreads.append(max(ends) - min(ends))
        first = min(starts.values())
        for rank, start in starts.items():
            late[rank].append(start - first)
        flagged[max(starts, key=lambda rank: starts[rank])] += 1
    per_rank = [
        {"rank": r["rank"], "late_start_us": statistics.median(late[r["rank"]]),
         "straggler_steps": flagged[r["rank"]]}
        for r in ranks
    ]  # fmt: skip
    worst_first = sorted(per_rank, key=lambda p: (-p["straggler_steps"], -p["late_start_us"]))
    ranking = [p["rank"] for p in worst_first]
    sample = next(iter(v for (s, n), v in last.items() if n == chosen))
    any_call = next(iter(sample.values()))
    # The method assumes a blocking collective ends at about the same time on every rank; ranks
    # that share too few cores end it milliseconds apart (seen: 4 ranks on 2 busy cores), and
    # then the start order says little.
    end_spread = statistics.median(end_spreads)
    worst_late = max(p["late_start_us"] for p in per_rank)
    return {
        "method": method,
        "collective": {"name": chosen, "path": any_call.get("path"), "line": any_call.get("line")},
        "steps": sum(1 for (s, n) in last if n == chosen),
        "ranking": ranking,
        "per_rank": per_rank,
        "end_spread_us": end_spread,
        "trusted": end_spread < worst_late / 2,
    }


def _start(by_rank: dict) -> float:
    """When the lowest rank started the call (its own clock: calls of one rank compared)."""
    return by_rank[min(by_rank)]["start_us"]


def _origin(r: dict, host0: str | None) -> float:
    """The wall-clock µs (on rank 0's clock) of this rank's profiler time 0."""
    timeline = r.get("rank_timeline") or {}
    start = timeline.get("trace_start_unix_us") or 0.0
    clock = r.get("clock") or {}
    if clock.get("host") and clock.get("host") != host0:
        start -= clock.get("offset_us") or 0.0
    return start


def _host0(ranks: list[dict]) -> str | None:
    return (ranks[0].get("clock") or {}).get("host")


def _alignment(ranks: list[dict]) -> dict:
    hosts = {(r.get("clock") or {}).get("host") for r in ranks}
    clocks = [r.get("clock") or {} for r in ranks]
    spread = max((c.get("spread_us") or 0.0 for c in clocks), default=0.0)
    skew = max((abs(c.get("offset_us") or 0.0) for c in clocks), default=0.0)
    if len(hosts) == 1:
        how = (
            "one host: every rank's profile starts at a time of the same wall clock; the "
            f"barrier check read the ranks within {skew:.0f} µs of each other at a barrier's exit"
        )
    else:
        how = (
            "several hosts: each rank's clock offset to rank 0 was measured at 5 barrier exits "
            f"and subtracted; good to about {max(spread, skew):.0f} µs"
        )
    return {"method": "barrier", "hosts": sorted(h for h in hosts if h), "how": how,
            "barrier_skew_us": skew, "barrier_spread_us": spread,
            "offsets_us": [c.get("offset_us") for c in clocks]}  # fmt: skip


def _aligned(ranks: list[dict], alignment: dict) -> list[dict]:
    """Each rank's profiled steps and collective calls in µs from the earliest step start."""
    origins = {r["rank"]: _origin(r, _host0(ranks)) for r in ranks}
    starts = [origins[r["rank"]] + s[0] for r in ranks
              for s in (r.get("rank_timeline") or {}).get("steps") or []]  # fmt: skip
    zero = min(starts) if starts else 0.0
    out = []
    for r in ranks:
        shift = origins[r["rank"]] - zero
        timeline = r.get("rank_timeline") or {}
        out.append({
            "rank": r["rank"],
            "steps": [[a + shift, b + shift] for a, b in timeline.get("steps") or []],
            "collectives": [_shifted(c, shift) for c in timeline.get("collectives") or []],
        })  # fmt: skip
    return out


def _shifted(call: dict, shift: float) -> dict:
    """A collective call moved by ``shift`` µs, its exposed parts kept inside it: shifted one by
    one, an exposed part's end (start + dur, then + shift) and the call's (start + shift, then
    + dur) can round apart by a last bit, and a part would end past its call."""
    start = call["start_us"] + shift
    end = start + call["dur_us"]
    moved = {**call, "start_us": start}
    if call.get("exposed") is not None:
        moved["exposed"] = [[min(max(a + shift, start), end), min(max(b + shift, start), end)]
                            for a, b in call["exposed"]]  # fmt: skip
    return moved
