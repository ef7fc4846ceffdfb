"""Step-time stability: medians with spread, and plain warnings when the figures mislead."""

from __future__ import annotations

from trnlens.agent import stability


def timing(median: float, low: float, high: float, repeats: int = 20) -> dict:
    return {"median_us": median, "min_us": low, "max_us": high, "repeats": repeats}


def test_summary_takes_the_median_not_the_mean():
    found = stability.summary([10.0, 11.0, 10.5, 300.0, 10.2])
    assert found == {"median_us": 10.5, "min_us": 10.0, "max_us": 300.0, "steps": 5}
    assert stability.summary([]) is None


def test_steady_figures_raise_nothing():
    profiled = stability.summary([1000.0, 1010.0, 1020.0, 990.0, 1000.0] * 2)
    found, warnings = stability.assess(profiled, timing(900.0, 880.0, 950.0), threads=1)
    assert warnings == [] and found["noisy"] is False
    assert round(found["profiler_overhead"], 3) == round(1000.0 / 900.0, 3)


def test_an_inflating_profiler_says_which_figure_to_trust_and_why():
    profiled = stability.summary([2800.0] * 12)
    found, (warning, advice) = stability.assess(profiled, timing(1000.0, 990.0, 1010.0), threads=2)
    assert found["noisy"] and found["profiler_overhead"] == 2.8
    assert "took 2.8x the unprofiled ones (median 2.8 ms vs 1 ms)" in warning
    assert "timing pass's median is the time to trust" in warning
    assert "OpenMP thread wake-ups between ops (2 threads)" in warning
    assert "--steps" in advice and "--repeats" in advice and "fewer threads" in advice
    assert "same setting" in advice  # fewer threads are steadier, not faster
    assert "--steps" not in warning  # the advice is said once, apart
    assert stability.is_stability_warning(warning) and stability.is_stability_warning(advice)
    assert not stability.is_stability_warning("import torch took 2.0 s (cold agent)")


def test_a_wide_spread_names_the_pass_the_cause_and_the_remedy():
    profiled = stability.summary([74_100.0, 43_500.0, 6_510.0])
    found, warnings = stability.assess(
        profiled, timing(7_000.0, 6_900.0, 7_100.0, repeats=5), busy=True
    )
    assert found["noisy"] and found["timing_spread"] < 0.5 < found["profiled_spread"]
    wide = [w for w in warnings if "vary widely" in w]
    assert len(wide) == 1 and wide[0].startswith("the profiled steps' times vary widely")
    assert "a busy machine" in wide[0] and "too few steps" in wide[0]
    assert stability.is_stability_warning(wide[0])
    assert [w for w in warnings if "--steps" in w] == [warnings[-1]]  # the advice once


def test_the_advice_is_given_once_however_many_figures_are_unstable():
    profiled = stability.summary([74_100.0, 43_500.0, 6_510.0])
    found, warnings = stability.assess(profiled, timing(3_000.0, 1_000.0, 9_000.0), busy=True)
    assert found["noisy"] and len([w for w in warnings if "vary widely" in w]) == 2
    assert sum(w.count("fewer threads") for w in warnings) == 1


def test_no_timing_pass_leaves_the_ratio_unknown():
    found, warnings = stability.assess(stability.summary([5.0, 5.1]), None)
    assert found["profiler_overhead"] is None and warnings == []


def test_page_faults_of_the_timing_pass_are_said_with_their_cost_and_remedy():
    faulting = {**timing(20_000.0, 19_000.0, 21_000.0), "page_faults": 8192}
    found, (warning,) = stability.assess(stability.summary([20_500.0] * 12, [8192] * 12), faulting)
    assert found["page_faults_per_step"] == 8192
    assert warning.startswith("every step faults in fresh memory (median 8,192 page faults")
    assert f"about {8192 * stability.PAGE_SIZE // 1024 // 1024} MB" in warning
    assert "MALLOC_MMAP_THRESHOLD_" in warning and "jemalloc" in warning
    assert stability.is_stability_warning(warning)


def test_faults_only_under_the_profiler_are_a_cause_of_its_inflation_not_the_codes_cost():
    settled = {**timing(4_000.0, 3_900.0, 4_100.0), "page_faults": 0}
    profiled = stability.summary([17_000.0] * 12, [8192] * 12)
    found, (warning, _) = stability.assess(profiled, settled, threads=1)
    assert found["page_faults_per_step"] == 0
    assert warning.startswith("the profiled steps took 4.2x")
    assert "page faults in the profiled steps" in warning


def test_profiled_steps_that_faulted_are_left_out_of_the_median_when_others_did_not():
    found = stability.profiled_summary([17_000.0, 4_000.0, 16_000.0, 4_200.0, 4_100.0],
                                       [4096, 0, 4096, 0, 0])  # fmt: skip
    assert found["median_us"] == 4_100.0 and found["max_us"] == 4_200.0
    assert found["steps"] == 3 and found["faulted_steps"] == 2 and found["page_faults"] == 0


def test_profiled_steps_all_faulting_or_all_calm_are_all_kept():
    every = stability.profiled_summary([17_000.0, 16_000.0, 4_000.0], [4096, 4096, 0])
    assert every["steps"] == 3 and "faulted_steps" not in every and every["page_faults"] == 4096
    calm = stability.profiled_summary([4_000.0, 4_100.0], [0, 0])
    assert calm["steps"] == 2 and "faulted_steps" not in calm
