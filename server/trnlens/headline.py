"""A run's one headline figure: the time per step every surface shows and history compares.

A run measures several times per step: the timing pass's median (calls without the profiler),
and the profiled steps' device time (CPU time of the ops, on the cpu backend), CPU time and wall
time. Surfaces used to pick among them on their own (the lens switched to the unprofiled median
only when the profiler inflated the steps beyond a limit, the toast showed the profiled time, a
report showed both in two tables), so two runs of the same function read "1.44 ms unprofiled"
then "1.13 ms CPU (ops)", and "vs previous" compared a figure the lens did not show (issue 30).

The headline is the timing pass's median whenever the run has one: the time a call takes as the
user's code runs it (no profiler's per-op cost, which differs between code shapes), the figure
a comparison's speed-ups are ratios of (agent/rounds.py), and the one whose spread the noise
verdicts read (history.py). A run without a timing pass (timing off, an old run) falls back to
the profiled time per step, and its label says "profiled". Lines, modules and findings are shares
of the same figure (agent/basis.py puts them on it).

Every surface (lens, hover, inlay hint tooltip, progress toast, CLI, report) and history's
"vs previous" call :func:`headline`.
"""

from __future__ import annotations

from dataclasses import dataclass

from trnlens.units import duration

UNPROFILED = "unprofiled"
PROFILED = "profiled"


@dataclass(frozen=True)
class Headline:
    """The figure (microseconds per step), its basis and the words that name it."""

    basis: str  # UNPROFILED (the timing pass's median) or PROFILED (no timing pass)
    time_us: float | None
    label: str  # 'unprofiled', or 'CPU (ops), profiled' / 'CUDA, profiled'

    @property
    def text(self) -> str:
        """'1.44 ms unprofiled', '1.13 ms CPU (ops), profiled'."""
        return f"{duration(self.time_us)} {self.label}"


def headline(data: dict) -> Headline:
    """The headline of one run's result dict (a comparison's variant alike)."""
    median = (data.get("timing") or {}).get("median_us")
    if median is not None:
        return Headline(UNPROFILED, float(median), UNPROFILED)
    device = data.get("device_time_per_step_us")
    # what device time is called, as Result.device_label: never 'device' for CPU time
    if data.get("time_basis") == "cpu":
        what = "CPU (ops)"
    else:
        what = str(data.get("backend") or "device").upper()
    return Headline(PROFILED, None if device is None else float(device), f"{what}, {PROFILED}")
