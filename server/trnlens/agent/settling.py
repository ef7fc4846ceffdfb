"""When a pass's steps count: page faults, settling, and the timing pass's figures.

A step that faults in fresh memory (the allocator handing big tensors' pages back to the OS, and
the next step zeroing new ones) takes several times a settled one, and starting or stopping the
profiler unsettles the allocator for a step or three: the headline and timing passes start
measuring only once ``CALM_STEPS`` steps in a row took no page fault (measure.Measurer._settled).
"""

from __future__ import annotations

import statistics
from typing import Any

try:
    import resource
except ImportError:  # not on Windows: page faults then go uncounted
    resource = None  # type: ignore[assignment]


# Steps in a row without a page fault after which a pass starts measuring.
CALM_STEPS = 2


def timing_figures(samples: list[float], faults: list[int]) -> dict:
    """The timing pass's figures: median, min and max of its calls, with the median page faults."""
    return {
        "median_us": statistics.median(samples),
        "min_us": min(samples),
        "max_us": max(samples),
        "repeats": len(samples),
        "page_faults": statistics.median(faults) if faults else 0,
    }


class SettlingSchedule:
    """A ``torch.profiler`` schedule that warms up until the measuring loop says the steps have
    settled (``record_from``), then records ``active`` steps: a fixed warm-up is too short when
    the profiler's start unsettles the allocator, and wasted when it does not."""

    def __init__(self, actions: Any, active: int) -> None:
        self.actions = actions  # torch.profiler.ProfilerAction
        self.active = active
        self.first: int | None = None  # the first recorded step's number

    @property
    def recording(self) -> bool:
        return self.first is not None

    def record_from(self, step_num: int) -> None:
        self.first = step_num

    def __call__(self, step_num: int) -> Any:
        if self.first is None or step_num < self.first:
            return self.actions.WARMUP
        index = step_num - self.first
        if index < self.active - 1:
            return self.actions.RECORD
        if index == self.active - 1:
            return self.actions.RECORD_AND_SAVE
        return self.actions.NONE


def page_faults() -> int:
    if resource is None:
        return 0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt
