"""Merging ranks, on hand-made ranks: waits, busy time, the slowest rank, HTA's straggler
ranking, and timelines put on one axis (one host, and several hosts with clock offsets)."""

from __future__ import annotations

import pytest
from trnlens.agent.ranks import merge as rankmerge


def make_rank(rank, work_us, *, host="h", origin_us=0.0, offset_us=0.0, steps=3, end_skew=0.0):
    """A rank whose step is ``work_us`` of compute then one all_reduce that ends, on the shared
    clock, at ``end`` for every rank (the slowest rank's work plus 100 µs of transfer)."""
    step_len = 10_000.0
    spans, calls = [], []
    for s in range(steps):
        start = s * step_len - origin_us
        end = start + 8_000 + end_skew * rank
        spans.append([start, start + step_len - 10])
        call_start = start + work_us
        calls.append({"name": "all_reduce", "path": "m.py", "line": 7, "async": False,
                      "step": s, "start_us": call_start, "dur_us": end - call_start})  # fmt: skip
    return {
        "rank": rank, "host": host, "artifacts": [{"kind": "chrome_trace", "path": "trace.json"}],
        "wall_time_per_step_us": step_len, "warnings": [], "run_id": f"r{rank}",
        "clock": {"host": host, "offset_us": offset_us, "spread_us": 5.0},
        # this rank's profiler started origin_us after the shared zero (its times are relative)
        "rank_timeline": {"trace_start_unix_us": 1e12 + origin_us + offset_us, "steps": spans,
                          "collectives": calls},
    }  # fmt: skip


def test_the_rank_with_more_work_is_the_slowest_and_the_others_wait():
    merged = rankmerge.merge("run", [make_rank(0, 2_000), make_rank(1, 7_000, origin_us=300)])
    rows = {r["rank"]: r for r in merged["ranks"]}
    assert merged["slowest_rank"] == 1
    assert rows[0]["collective_wait_per_step_us"] == pytest.approx(5_000)
    assert rows[1]["collective_wait_per_step_us"] == 0
    assert rows[0]["busy_time_per_step_us"] == pytest.approx(9_990 - 5_000)
    (row,) = merged["collectives"]
    assert (row["name"], row["path"], row["line"], row["calls_per_step"]) == (
        "all_reduce", "m.py", 7, 1
    )  # fmt: skip
    assert merged["stragglers"]["ranking"] == [1, 0]
    assert merged["stragglers"]["per_rank"][1]["late_start_us"] == pytest.approx(5_000)
    assert merged["stragglers"]["trusted"]
    assert [a["path"] for a in merged["artifacts"]] == ["rank-0/trace.json", "rank-1/trace.json"]


def test_timelines_share_one_axis_on_one_host():
    merged = rankmerge.merge("run", [make_rank(0, 2_000), make_rank(1, 7_000, origin_us=300)])
    first = [t["steps"][0][0] for t in merged["rank_timelines"]]
    assert first == pytest.approx([0.0, 0.0])  # both started step 0 at the same shared time


def test_several_hosts_are_aligned_by_the_barrier_offsets():
    # host b's clock runs 1 s ahead: its offset to rank 0, measured at the barriers, is removed
    ranks = [make_rank(0, 2_000, host="a"), make_rank(1, 7_000, host="b", offset_us=1e6)]
    merged = rankmerge.merge("run", ranks)
    assert [t["steps"][0][0] for t in merged["rank_timelines"]] == pytest.approx([0.0, 0.0])
    assert merged["stragglers"]["ranking"] == [1, 0]
    assert merged["alignment"]["hosts"] == ["a", "b"]


def test_a_late_start_ranking_is_not_trusted_when_the_collective_ends_far_apart():
    ranks = [make_rank(r, 2_000 + 1_000 * r, end_skew=4_000) for r in range(3)]
    merged = rankmerge.merge("run", ranks)
    assert not merged["stragglers"]["trusted"]
    assert any("not to be trusted" in w for w in merged["warnings"])


def test_device_overlap_figures_reach_each_ranks_row():
    figures = {"comm_kernel_time_per_step_us": 60.0, "overlapped_comm_per_step_us": 45.0,
               "exposed_comm_per_step_us": 15.0, "overlap_share": 0.75}  # fmt: skip
    ranks = [make_rank(0, 2_000), make_rank(1, 7_000)]
    ranks[1]["rank_timeline"]["overlap"] = figures
    rows = rankmerge.merge("run", ranks)["ranks"]
    assert "exposed_comm_per_step_us" not in rows[0]  # no device kernels read on rank 0
    assert {k: rows[1][k] for k in figures} == figures


def test_a_warning_only_another_rank_saw_is_kept_with_its_rank():
    ranks = [make_rank(0, 2_000), make_rank(1, 7_000)]
    ranks[0]["warnings"] = ["the machine is busy (load 3.1 on 2 cores)"]
    ranks[1]["warnings"] = ["the machine is busy (load 3.4 on 2 cores)", "no events recorded"]
    warnings = rankmerge.merge("run", ranks)["warnings"]
    assert warnings[:2] == [
        "the machine is busy (load 3.1 on 2 cores)",
        "rank 1: no events recorded",
    ]


def test_buckets_in_flight_together_count_once_with_their_exposed_part_bytes_and_modules():
    """Two DDP buckets per step, in flight together: the time in collectives is their union, the
    exposed part the union of theirs; bytes and bandwidth add up; the row names the modules."""
    ranks = []
    for rank, late in ((0, 0.0), (1, 1_000.0)):
        r = make_rank(rank, 2_000)
        calls = []
        for s, (a, _end) in enumerate(r["rank_timeline"]["steps"]):
            for bucket, (start, end) in enumerate(((a + 1_000, a + 5_000), (a + 2_000, a + 6_000))):
                start += late  # rank 1 launches later: rank 0 waits 1 ms in each
                calls.append({
                    "name": "all_reduce", "path": "train.py", "line": 21, "step": s,
                    "source": "ddp", "bucket": bucket, "modules": [f"m.{bucket}"],
                    "bytes": 4_000_000, "start_us": start, "dur_us": end - start,
                    "exposed": [[a + 4_000, end]],  # backward's compute hid the rest
                })  # fmt: skip
        r["rank_timeline"]["collectives"] = calls
        ranks.append(r)
    merged = rankmerge.merge("run", ranks)
    rows = {r["rank"]: r for r in merged["ranks"]}
    assert rows[0]["collective_time_per_step_us"] == pytest.approx(5_000)  # 1-6 ms, once
    assert rows[1]["collective_time_per_step_us"] == pytest.approx(4_000)  # 2-6 ms
    assert rows[0]["collective_wait_per_step_us"] == pytest.approx(2_000)  # 1-2 and 2-3 ms
    assert rows[0]["collective_exposed_per_step_us"] == pytest.approx(2_000)  # 4-6 ms
    assert rows[0]["collective_bytes_per_step"] == 8_000_000
    # 8 MB over each call's transfer (its time less its wait: 3 ms + 3 ms) = 1.33 GB/s
    assert rows[0]["collective_bandwidth_gbps"] == pytest.approx(8e6 / 6_000 / 1e3)
    (row,) = merged["collectives"]
    assert (row["source"], row["modules"], row["bytes_per_step"]) == ("ddp", ["m.0", "m.1"], 8e6)
    assert [b["index"] for b in row["buckets"]] == [0, 1]
    timeline = merged["rank_timelines"][0]["collectives"][0]
    assert timeline["exposed"][0][0] >= timeline["start_us"]  # moved onto the axis with the call


def test_a_calls_exposed_parts_stay_inside_it_after_the_shift_onto_one_axis():
    """Shifted one by one, an exposed part that ends where its call ends can round past it; the
    part is kept inside the call (the DDP ranks test caught one a last bit out)."""
    # values whose sums round differently by order: (s + d) + k > (s + k) + d in floats
    s, d, k = 20244.023987302375, 6591.292753902894, -521250317.7296333
    assert (s + d) + k > (s + k) + d
    call = {"name": "all_reduce", "start_us": s, "dur_us": d, "exposed": [[s, s + d]]}
    moved = rankmerge._shifted(call, k)
    end = moved["start_us"] + moved["dur_us"]
    assert all(moved["start_us"] <= a <= b <= end for a, b in moved["exposed"])
    assert moved["exposed"][0][1] == end


def _with_memory(rank: dict, peak: int, limit: int | None, growth: int = 0) -> dict:
    rank["memory"] = {"peak_bytes": peak, "growth_per_step_bytes": growth, "limit_bytes": limit,
                      "limit_basis": "the GPU's memory" if limit else None}  # fmt: skip
    return rank


def test_the_rank_nearest_its_limit_is_the_fullest_not_the_largest():
    # rank 0 holds more, but on a larger device: rank 1 (6 of 8 GB) runs out first
    ranks = [_with_memory(make_rank(0, 2_000), 7 << 30, 16 << 30),
             _with_memory(make_rank(1, 7_000), 6 << 30, 8 << 30, growth=4096)]  # fmt: skip
    merged = rankmerge.merge("run", ranks)
    rows = {r["rank"]: r for r in merged["ranks"]}
    assert rows[0]["peak_memory_bytes"] == 7 << 30 and rows[1]["memory_limit_bytes"] == 8 << 30
    assert rows[1]["memory_growth_per_step_bytes"] == 4096
    assert merged["memory_nearest_limit"] == {
        "rank": 1, "peak_bytes": 6 << 30, "limit_bytes": 8 << 30, "share_of_limit": 0.75,
        "limit_basis": "the GPU's memory", "others_median_bytes": 7 << 30,
        "basis": "peak over the device's memory",
    }  # fmt: skip
    assert merged["memory"]["rank"] == 0  # the figures above the ranks: rank 0's, labelled


def test_without_a_known_limit_the_highest_peak_is_named_and_one_peak_names_none():
    ranks = [_with_memory(make_rank(0, 2_000), 7 << 30, 16 << 30),
             _with_memory(make_rank(1, 7_000), 6 << 30, None)]  # fmt: skip
    nearest = rankmerge.merge("run", ranks)["memory_nearest_limit"]
    assert (nearest["rank"], nearest["limit_bytes"], nearest["share_of_limit"]) == (0, None, None)
    assert nearest["basis"].startswith("the highest peak")
    # a rank whose memory pass failed: its host peak is another figure, and no rank is named
    failed = [_with_memory(make_rank(0, 2_000), 7 << 30, 16 << 30),
              {**make_rank(1, 7_000), "peak_memory_bytes": 9 << 30}]  # fmt: skip
    merged = rankmerge.merge("run", failed)
    assert merged["memory_nearest_limit"] is None
    assert [r["peak_memory_bytes"] for r in merged["ranks"]] == [7 << 30, None]
    # a run without memory figures (an XLA rank, an older agent) names no rank
    assert (
        rankmerge.merge("run", [make_rank(0, 2_000), make_rank(1, 7_000)])["memory_nearest_limit"]
        is None
    )
