"""The per-rank part of ``trnlens profile --nproc-per-node N``: ranks, collectives, stragglers."""

from __future__ import annotations

from trnlens import rankfigures, units


def ranks_lines(data: dict, table) -> list[str]:
    if not rankfigures.is_multi_rank(data):
        return []
    d = units.duration
    out = ["", f"Ranks  ({rankfigures.headline(data)}; process group {data.get('dist_backend')})"]
    out.append(
        "  busy = wall minus the wait in collectives (each call's excess over the fastest rank's); "
        "the figures above and the op table are rank 0's"
    )
    slowest = data.get("slowest_rank")
    rows = []
    for row in data["ranks"]:
        rows.append([
            f"{row['rank']}{' *' if row['rank'] == slowest else ''}",
            row.get("host") or "",
            d(row["wall_time_per_step_us"]),
            d(row.get("busy_time_per_step_us")),
            d(row.get("cpu_time_per_step_us")),
            f"{row.get('dispatches_per_step') or 0:g}",
            d(row["collective_time_per_step_us"]),
            d(row["collective_wait_per_step_us"]),
            d(row.get("collective_exposed_per_step_us")),
            _bandwidth(row.get("collective_bandwidth_gbps")),
            d(row.get("timing_median_us")),
            _data(row.get("peak_memory_bytes")),
        ])  # fmt: skip
    headers = ["Rank", "Host", "Wall", "Busy", "CPU (step)", "Dispatches", "In collectives",
               "Waiting", "Exposed", "Bandwidth", "Timing median", "Peak memory"]  # fmt: skip
    out.extend(table(headers, rows, set(range(2, 12))))
    out.append(
        "  exposed = the time in collectives no compute of the rank hid; bandwidth = bytes over "
        "the time in collectives less the wait (nccl-tests' algbw)"
    )
    if slowest is not None:
        out.append("  * slowest rank (most busy time per step)")
    memory = rankfigures.nearest_limit_words(data)
    if memory:
        out.append(f"  memory: {memory}")
    for row in data["ranks"]:
        if row.get("memory_growth_per_step_bytes"):
            grows = units.data_size(row["memory_growth_per_step_bytes"])
            out.append(f"  GROWTH on rank {row['rank']}: memory grows {grows} a step")
    for row in data["ranks"]:
        if row.get("exposed_comm_per_step_us") is not None:  # device kernels (CUDA)
            comm = d(row["comm_kernel_time_per_step_us"])
            out.append(
                f"  rank {row['rank']}: communication kernels {comm}/step, "
                f"{d(row['overlapped_comm_per_step_us'])} overlapped by compute, "
                f"{d(row['exposed_comm_per_step_us'])} exposed"
            )
    if data.get("collectives"):
        out.append("")
        out.append("Collectives (per step; wait = time waiting for the other ranks)")
        rows = []
        for row in data["collectives"]:
            where = (
                f"{row['path']}:{row['line']}"
                if row.get("path")
                else "(in the compiled graph)"
                if row.get("compiled")
                else "(outside the project)"
            )
            share = row.get("share_of_step")
            rows.append([
                row["name"], where, f"{row.get('calls_per_step', 0):g}",
                f"{100 * share:.0f}%" if share is not None else "-",
                "  ".join(f"r{p['rank']} {d(p['time_per_step_us'])}" for p in row["per_rank"]),
                "  ".join(f"r{p['rank']} {d(p['wait_per_step_us'])}" for p in row["per_rank"]),
            ])  # fmt: skip
        out.extend(table(["Collective", "Line", "Calls", "Share", "Time", "Wait"], rows, {2, 3}))
        for row in data["collectives"]:
            out.extend(_owners(row))
    strag = data.get("stragglers") or {}
    if strag.get("ranking"):
        c = strag.get("collective") or {}
        late = {p["rank"]: p for p in strag.get("per_rank") or []}
        ranked = ", ".join(
            f"rank {r} (late {d(late[r]['late_start_us'])}, {late[r]['straggler_steps']}/"
            f"{strag.get('steps')} steps)"
            for r in strag["ranking"]
        )
        out.append(
            f"Stragglers (HTA's late start of the last {c.get('name')} in each step): {ranked}"
        )
    alignment = data.get("alignment") or {}
    if alignment.get("how"):
        out.append(f"Timelines on one axis: {alignment['how']}")
    return out


def _bandwidth(gbps: float | None) -> str:
    return "-" if gbps is None else f"{gbps:.3g} GB/s"


def _owners(row: dict) -> list[str]:
    """What a collective moved (DDP's buckets, FSDP2's sharded modules), under the table."""
    what = rankfigures.moved(row)
    if what is None:
        return []
    where = f"{row['name']} at {row['path']}:{row['line']}" if row.get("path") else row["name"]
    return [f"  {where}: {what}"]


def _data(size: int | None) -> str:
    return units.data_size(size) if isinstance(size, int) else "-"
