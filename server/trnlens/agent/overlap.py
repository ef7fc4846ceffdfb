"""Communication/computation overlap on the device, HTA's way: merge each kind's kernel intervals,
then sweep the communication intervals against the compute ones.

Where the backend runs collectives on their own stream (nccl on CUDA), communication can hide
behind compute; what does not is *exposed* and adds to the step. Pure (intervals in, figures
out), so it is tested on hand-made intervals; it has not been run on a GPU here (none was
available), and the CPU backend (gloo) has no device kernels to read.
"""

from __future__ import annotations

COMM_MARKERS = ("nccl", "rccl")  # kernel names of the collective libraries


def is_comm_kernel(name: str) -> bool:
    lowered = name.lower()
    return any(marker in lowered for marker in COMM_MARKERS)


def merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length where two merged, sorted interval lists overlap (one sweep)."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if end > start:
            total += end - start
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def figures(kernels: list[tuple[str, float, float]], steps: int) -> dict | None:
    """``kernels``: (name, start µs, end µs) of the device kernels of the profiled steps.
    Per step: communication time (its merged intervals), the part overlapped by compute, the
    exposed rest; None when no communication kernel ran."""
    comm = merge([(s, e) for name, s, e in kernels if is_comm_kernel(name)])
    if not comm:
        return None
    compute = merge([(s, e) for name, s, e in kernels if not is_comm_kernel(name)])
    comm_us = sum(e - s for s, e in comm)
    overlapped = intersection(comm, compute)
    n = max(steps, 1)
    return {
        "comm_kernel_time_per_step_us": comm_us / n,
        "overlapped_comm_per_step_us": overlapped / n,
        "exposed_comm_per_step_us": (comm_us - overlapped) / n,
        "overlap_share": overlapped / comm_us if comm_us else None,
    }
