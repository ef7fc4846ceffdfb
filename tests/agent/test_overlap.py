"""Communication/compute overlap on hand-made kernel intervals (no GPU here: see overlap.py)."""

from __future__ import annotations

import pytest
from trnlens.agent import overlap


def test_merged_communication_is_split_into_overlapped_and_exposed():
    kernels = [
        ("ampere_sgemm_128x64", 0.0, 50.0),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 30.0, 80.0),
        ("vectorized_elementwise_kernel", 60.0, 70.0),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 75.0, 90.0),
    ]
    # communication merges to 30-90 (60 µs); compute covers 30-50 and 60-70 of it (30 µs)
    got = overlap.figures(kernels, steps=2)
    assert got["comm_kernel_time_per_step_us"] == pytest.approx(60.0 / 2)
    assert got["overlapped_comm_per_step_us"] == pytest.approx(30.0 / 2)
    assert got["exposed_comm_per_step_us"] == pytest.approx(30.0 / 2)
    assert got["overlap_share"] == pytest.approx(0.5)


def test_no_communication_kernel_means_no_figures():
    assert overlap.figures([("ampere_sgemm", 0.0, 5.0)], steps=1) is None
