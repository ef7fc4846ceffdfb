"""Timing several variants against each other: interleaved rounds and per-round ratios.

Timing each variant in its own pass and pairing the extremes of two separate runs (the
baseline's min over the variant's max, and the reverse) gave ranges such as 0.014x-72x for a
function compared with itself on a busy 2-core machine: whatever the machine did during one
pass landed on one variant only. Here the variants take turns, one call each per round
(A B C, A B C, ...), so that a burst of other work lands on every variant of the rounds it spans,
and each round gives one ratio per variant (the baseline's time in that round over the
variant's). The speed-up is the median of those ratios and its range their 10th to 90th
percentiles: the spread of a like-for-like comparison, not of two unrelated runs.

Pure stdlib: part of the agent.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

LOW, HIGH = 0.10, 0.90  # the quantiles of the per-round ratios that bound the range


def ratio_figures(
    base: Sequence[float], other: Sequence[float]
) -> tuple[float | None, list[float] | None]:
    """(median ratio, [10th, 90th percentile]) of ``base[i] / other[i]`` over the rounds both
    timed; (None, None) without any round (a ratio needs the same round's two times)."""
    ratios = [b / o for b, o in zip(base, other, strict=False) if b > 0 and o > 0]
    if not ratios:
        return None, None
    if len(ratios) == 1:
        return ratios[0], [ratios[0], ratios[0]]
    return statistics.median(ratios), [_quantile(ratios, LOW), _quantile(ratios, HIGH)]


def _quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile by linear interpolation between the closest ranks (numpy's default,
    and ``statistics.quantiles(method="inclusive")``), for any ``q`` in [0, 1]."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def contains_one(span: Sequence[float] | None) -> bool:
    """Whether a speed-up range includes 1.0: then no difference was measured."""
    if not span:
        return False
    return span[0] <= 1.0 <= span[1]


def interleave(
    calls: Sequence[Callable[[], float]],
    repeats: int,
    budget_s: float,
    settle_rounds: int,
    check: Callable[[], None],
    min_rounds: int = 5,
) -> list[list[float]]:
    """Each variant's times (one per round, microseconds) over interleaved rounds.

    ``calls[i]()`` runs variant i once, synchronised, and returns its time. ``settle_rounds``
    rounds run first and do not count (the passes before unsettle the allocator); then up to
    ``repeats`` rounds, stopping after ``min_rounds`` once ``budget_s`` is spent. ``check``
    raises to cancel."""
    for _ in range(settle_rounds):
        for call in calls:
            check()
            call()
    samples: list[list[float]] = [[] for _ in calls]
    deadline = time.perf_counter() + budget_s
    for _ in range(repeats):
        for index, call in enumerate(calls):
            check()
            samples[index].append(call())
        if len(samples[0]) >= min_rounds and time.perf_counter() > deadline:
            break
    return samples
