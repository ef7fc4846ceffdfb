"""A run's one headline figure (trnlens/headline.py): what every surface shows, history compares."""

from __future__ import annotations

from trnlens.headline import PROFILED, UNPROFILED, headline


def test_the_timing_pass_median_is_the_headline_whatever_the_profilers_overhead():
    for overhead in (1.05, 1.8, 14.2):
        data = {
            "time_basis": "cpu",
            "backend": "cpu",
            "device_time_per_step_us": 1_130.0,
            "timing": {"median_us": 1_440.0},
            "stability": {"profiler_overhead": overhead},
        }
        shown = headline(data)
        assert (shown.basis, shown.time_us, shown.text) == (
            UNPROFILED,
            1_440.0,
            "1.44 ms unprofiled",
        )


def test_without_a_timing_pass_the_profiled_time_says_so():
    cpu = headline({"time_basis": "cpu", "backend": "cpu", "device_time_per_step_us": 1_620.0})
    assert (cpu.basis, cpu.text) == (PROFILED, "1.62 ms CPU (ops), profiled")
    cuda = headline({"time_basis": "device", "backend": "cuda", "device_time_per_step_us": 80.0})
    assert cuda.text == "80.0 µs CUDA, profiled"
    nothing = headline({"time_basis": "cpu", "backend": "cpu"})
    assert nothing.time_us is None and nothing.text == "– CPU (ops), profiled"
