"""Scaled units and labels that follow the run's time basis."""

from __future__ import annotations

import datetime as dt

import pytest
from trnlens.lsp import format
from trnlens.results import Result


@pytest.mark.parametrize(
    ("us", "text"),
    [(0.25, "250 ns"), (7.5, "7.50 µs"), (700, "700 µs"), (1840, "1.84 ms"), (12_340, "12.3 ms"),
     (123_400, "123 ms"), (2_500_000, "2.50 s"), (None, "–")],
)  # fmt: skip
def test_duration_scales_units(us, text):
    assert format.duration(us) == text


def test_counts_are_plural_aware():
    assert format.count(1, "dispatch") == "1 dispatch"
    assert format.count(6.0, "dispatch") == "6 dispatches"
    assert format.count(2, "call") == "2 calls"


def test_age():
    now = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.timezone.utc)
    assert format.age("2026-01-01T11:59:50+00:00", now) == "just now"
    assert format.age("2026-01-01T11:58:00+00:00", now) == "2 min ago"
    assert format.age("2026-01-01T09:00:00+00:00", now) == "3 h ago"
    assert format.age("2025-12-28T12:00:00+00:00", now) == "4 d ago"
    assert format.age("garbage", now) == "at an unknown time"


def _result(time_basis: str, backend: str) -> Result:
    return Result(
        {"time_basis": time_basis, "backend": backend, "device_time_per_step_us": 1840,
         "cpu_time_per_step_us": 310, "dispatches_per_step": 6}
    )  # fmt: skip


def test_headline_never_says_device_for_a_cpu_run():
    # no timing pass: the profiled time is the headline, and says so
    assert format.headline(_result("cpu", "cpu")) == "1.84 ms CPU (ops), profiled · 6 dispatches"
    assert format.headline(_result("device", "neuron")) == (
        "1.84 ms NEURON, profiled · 6 dispatches"
    )


def test_shapes_are_short():
    shapes = [[[4, 512], [512]], [[4, 512], []], [[1]]]
    assert format.shapes(shapes) == "[4, 512], [512] · [4, 512] …"
    assert format.shapes(None) == ""


def test_a_run_headlines_its_unprofiled_median_however_inflated_and_a_noisy_one_says_so():
    data = _result("cpu", "cpu").data
    data["timing"] = {"median_us": 38_600.0, "min_us": 38_000.0, "max_us": 39_000.0, "repeats": 20}
    data["stability"] = {"profiler_overhead": 2.1, "noisy": True}
    assert format.headline(Result(data)) == "38.6 ms unprofiled · 6 dispatches · noisy"
    data["stability"] = {"profiler_overhead": 1.2, "noisy": True}  # a calm profile: same figure
    assert format.headline(Result(data)) == "38.6 ms unprofiled · 6 dispatches · noisy"
    data["stability"] = {"profiler_overhead": 1.2, "noisy": False}
    assert "noisy" not in format.headline(Result(data))
