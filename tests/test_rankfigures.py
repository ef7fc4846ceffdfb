"""The words for a multi-rank result, the same in the CLI, the lens, the hints and the report."""

from __future__ import annotations

from trnlens import rankfigures

RESULT = {
    "world_size": 2,
    "ranks": [{"rank": 0}, {"rank": 1}],
    "slowest_rank": 1,
    "rank_spread": {"slowest_vs_others_pct": 38.2},
    "collectives": [
        {"name": "broadcast", "share_of_step": 0.02, "per_rank": []},
        {"name": "all_reduce", "share_of_step": 0.241, "per_rank": [
            {"rank": 1, "time_per_step_us": 1070.0, "wait_per_step_us": 0.0},
            {"rank": 0, "time_per_step_us": 5770.0, "wait_per_step_us": 4910.0},
        ]},
    ],
}  # fmt: skip


def test_the_headline_names_the_slowest_rank_and_the_costliest_collective():
    assert rankfigures.headline(RESULT) == (
        "2 ranks · slowest rank 1 (busy +38%) · 24% in all_reduce"
    )


def test_a_single_process_result_has_no_ranks_headline():
    assert rankfigures.headline({"ranks": None}) is None
    assert rankfigures.headline({**RESULT, "world_size": 1}) is None


def test_without_collectives_the_headline_stops_at_the_slowest_rank():
    assert rankfigures.headline({**RESULT, "collectives": []}) == (
        "2 ranks · slowest rank 1 (busy +38%)"
    )


def test_a_collectives_hint_lists_each_ranks_wait_in_rank_order():
    assert rankfigures.collective_hint(RESULT["collectives"][1]) == (
        "all_reduce: wait r0 4.91 ms · r1 0 ns (in it: 5.77 ms, 1.07 ms per step)"
    )


def test_what_a_collective_moved_names_ddps_buckets_and_fsdps_modules():
    buckets = [{"index": 0, "modules": ["m.4", "m.2"]}, {"index": 1, "modules": ["m.0"]}]
    ddp = {"name": "all_reduce", "bytes_per_step": 1_059_872, "source": "ddp", "buckets": buckets}
    assert rankfigures.moved(ddp) == (
        "DDP's reducer, 1.1 MB per step: bucket 0 (m.4, m.2); bucket 1 (m.0)"
    )
    fsdp = {"name": "all_gather_single", "source": "fsdp", "modules": ["model.0", "model.2"]}
    assert rankfigures.moved(fsdp) == "FSDP2: model.0, model.2"
    assert rankfigures.moved({"name": "all_reduce"}) is None


def test_the_lens_says_the_ranks_once_and_whose_figures_it_shows():
    assert rankfigures.lens_text(RESULT) == "rank 1 of 2 (slowest: busy +38%) · 24% in all_reduce"
    assert rankfigures.lens_text({**RESULT, "world_size": 1}) is None


def test_the_slowest_ranks_lead_names_what_it_compares():
    """Issue 42: "rank 0 of 2 (slowest, +68%)" where the walls were 7.27 and 7.20 ms: the +68%
    is busy time (wall minus the wait in collectives), and the words now say so, the walls'
    near-equality beside it."""
    ranks = [
        {"rank": 0, "wall_time_per_step_us": 7270.0, "busy_time_per_step_us": 5000.0},
        {"rank": 1, "wall_time_per_step_us": 7200.0, "busy_time_per_step_us": 2976.0},
    ]
    result = {**RESULT, "ranks": ranks, "slowest_rank": 0,
              "rank_spread": {"slowest_vs_others_pct": 68.0}}  # fmt: skip
    assert rankfigures.lens_text(result).startswith("rank 0 of 2 (slowest: busy +68%, wall +1%)")
    assert rankfigures.headline(result).startswith("2 ranks · slowest rank 0 (busy +68%, wall +1%)")
    assert rankfigures.versus_others({**result, "rank_spread": None}) == ""


def test_the_slowest_view_takes_the_slowest_ranks_own_figures():
    result = {
        **RESULT,
        "dispatches_per_step": 4, "device_time_per_step_us": 100.0, "timing": {"median_us": 9.0},
        "ranks": [
            {"rank": 0, "dispatches_per_step": 4, "device_time_per_step_us": 100.0},
            {"rank": 1, "dispatches_per_step": 16, "device_time_per_step_us": 400.0,
             "timing_median_us": 30.0},
        ],
    }  # fmt: skip
    view = rankfigures.slowest_view(result)
    assert view["dispatches_per_step"] == 16 and view["device_time_per_step_us"] == 400.0
    assert view["timing"] == {"median_us": 30.0}
    assert result["dispatches_per_step"] == 4  # the result itself is left alone


def test_a_collectives_hint_fits_vs_codes_hint_length_with_every_figure_in_the_tooltip():
    row = RESULT["collectives"][1]
    short = rankfigures.short_collective_hint(row)
    assert short == "all_reduce: r0 waits 4.91 ms of 5.77 ms"
    assert len(short) <= rankfigures.HINT_CHARS == 43
    long_name = {**row, "name": "reduce_scatter_tensor_coalesced"}
    assert len(rankfigures.short_collective_hint(long_name, " · stale")) <= 43
    assert rankfigures.short_collective_hint(long_name, " · stale").endswith("· stale")


NEAREST = {
    "rank": 1, "peak_bytes": 6_000_000_000, "limit_bytes": 8_000_000_000,
    "share_of_limit": 0.75, "limit_basis": "the GPU's memory",
    "others_median_bytes": 7_000_000_000, "basis": "peak over the device's memory",
}  # fmt: skip


def test_the_rank_nearest_its_memory_limit_is_named_with_its_share_and_basis():
    result = {**RESULT, "memory_nearest_limit": NEAREST}
    assert rankfigures.nearest_limit_words(result) == (
        "rank 1 nearest its memory limit: peak 6.0 GB of 8.0 GB (75%, the GPU's memory); "
        "the others' median 7.0 GB"
    )
    assert rankfigures.peak_label(result) == (1, 6_000_000_000)
    tiny = {**NEAREST, "share_of_limit": 0.00001}
    assert "(<0.01%," in rankfigures.nearest_limit_words({**RESULT, "memory_nearest_limit": tiny})


def test_without_a_limit_the_highest_peak_is_said_and_one_rank_says_nothing():
    unknown = {**NEAREST, "limit_bytes": None, "share_of_limit": None, "limit_basis": None}
    assert rankfigures.nearest_limit_words({**RESULT, "memory_nearest_limit": unknown}) == (
        "rank 1 has the highest memory peak: 6.0 GB; the others' median 7.0 GB"
    )
    alone = {**RESULT, "world_size": 1, "memory_nearest_limit": NEAREST}
    assert rankfigures.nearest_limit_words(alone) is None and rankfigures.peak_label(alone) is None
