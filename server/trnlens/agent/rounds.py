"""Timing several variants against each other: interleaved rounds and per-round ratios.

Timing each variant in its own pass and pairing the extremes of two separate runs (the
baseline's min over the variant's max, and the reverse) gave ranges such as 0.014x-72x for a
function compared with itself on a busy 2-core machine: whatever the machine did during one
pass landed on one variant only. Here the variants take turns, one call each per round, so that
a burst of other work lands on every variant of the rounds it spans, and each round gives one
ratio per variant (the baseline's time in that round over the variant's). The order alternates
from round to round (A B C, C B A, A B C, ...): a fixed order gave every variant the same place
in every round, and a place has its cost (the first call after the previous round's last variant
finds the caches holding that variant's tensors), a small systematic effect that narrow ranges
read as a speed-up (18 of 20 "no difference" for identical code, issue 30). Alternating puts
each variant first and last equally often, so the place's cost cancels in the median.

The speed-up is the ratio of the two variants' medians over these same rounds (the medians the
tables show beside it, so the two can never point opposite ways) and its range the 10th to 90th
percentiles of the per-round ratios (widened to hold the speed-up, when rounds contradict each
other): the spread of a like-for-like comparison, not of two unrelated runs.

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
    """(median of ``base`` over median of ``other``, [10th, 90th percentile] of the per-round
    ratios ``base[i] / other[i]``) over the rounds both timed; (None, None) without any round
    (a ratio needs the same round's two times)."""
    pairs = [(b, o) for b, o in zip(base, other, strict=False) if b > 0 and o > 0]
    if not pairs:
        return None, None
    ratios = [b / o for b, o in pairs]
    speedup = statistics.median(b for b, _ in pairs) / statistics.median(o for _, o in pairs)
    if len(ratios) == 1:
        return speedup, [speedup, speedup]
    # Rounds that contradict each other (the medians one way, most per-round ratios the other)
    # give a range that holds the speed-up and 1.0 alike: no measurable difference.
    low, high = _quantile(ratios, LOW), _quantile(ratios, HIGH)
    return speedup, [min(low, speedup), max(high, speedup)]


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
    """Each variant's times (one per round, microseconds) over interleaved rounds, the order
    reversed every other round (:func:`order`).

    ``calls[i]()`` runs variant i once, synchronised, and returns its time. ``settle_rounds``
    rounds run first and do not count (the passes before unsettle the allocator); then up to
    ``repeats`` rounds, stopping after ``min_rounds`` once ``budget_s`` is spent. ``check``
    raises to cancel."""
    for number in range(settle_rounds):
        for index in order(len(calls), number):
            check()
            calls[index]()
    samples: list[list[float]] = [[] for _ in calls]
    deadline = time.perf_counter() + budget_s
    for counted in range(repeats):
        for index in order(len(calls), settle_rounds + counted):
            check()
            samples[index].append(calls[index]())
        # an even number of rounds: each variant as often first as last
        if counted % 2 and counted + 1 >= min_rounds and time.perf_counter() > deadline:
            break
    return samples


def order(count: int, number: int) -> list[int]:
    """The variants' order in round ``number``: 0 1 2 ..., then reversed, in turn."""
    forward = list(range(count))
    return forward if number % 2 == 0 else forward[::-1]
