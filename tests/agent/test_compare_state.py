"""Comparisons start every variant from the same state, and time them in interleaved rounds."""

from __future__ import annotations

import statistics

from trnlens.agent import rounds

from tests.agent.conftest import run

# A training step that changes its module and optimizer every call: before the snapshot, the
# second variant started from the state the first one's passes left behind (max |diff| 0.0034).
STATEFUL = """
import torch
from torch import nn


def make():
    model = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.1), nn.Linear(32, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return model, opt, torch.randn(8, 16), torch.randn(8, 1)


# trnlens: inputs=make
def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return model(x)
"""

# Its output depends on a module global that every call changes: no snapshot of the inputs
# can make two runs agree, so no difference can be read from the outputs.
GLOBAL_STATE = """
import torch

CALLS = [0]


def counted(x=torch.ones(4)):
    CALLS[0] += 1
    return x * CALLS[0]
"""


def test_identical_stateful_step_gives_identical_outputs(make_project):
    root = make_project({"train.py": STATEFUL})
    same = {"path": "train.py", "qualname": "train_step"}
    outcome = run(root, [same, {**same, "label": "again"}], repeats=5)
    assert [v["error"] for v in outcome["variants"]] == [None, None]
    assert [v["mode"] for v in outcome["variants"]] == ["as-written", "as-written"]
    assert outcome["max_abs_diff"] == [0.0, 0.0]
    assert "outputs_not_comparable" not in outcome
    # Speed-ups from the interleaved rounds: the baseline's ratio to itself is 1 in every round.
    assert outcome["speedup_method"] == "rounds"
    assert outcome["speedups"][0] == 1.0 and outcome["speedup_ranges"][0] == [1.0, 1.0]
    low, high = outcome["speedup_ranges"][1]
    assert low <= outcome["speedups"][1] <= high
    # Each variant's timing figures are its share of the same rounds.
    repeats = [v["timing"]["repeats"] for v in outcome["variants"]]
    assert repeats[0] == repeats[1] >= 1
    assert all(v["stability"] is not None for v in outcome["variants"])


def test_outputs_that_depend_on_globals_are_not_compared(make_project):
    root = make_project({"glob.py": GLOBAL_STATE})
    same = {"path": "glob.py", "qualname": "counted"}
    outcome = run(root, [same, {**same, "label": "again"}])
    assert outcome["max_abs_diff"] == [None, None]
    note = outcome["outputs_not_comparable"]
    assert note.startswith("outputs not comparable:") and "state outside the inputs" in note
    assert note in outcome["warnings"]
    assert outcome["variants"][1]["comparison"]["outputs_not_comparable"] == note


def test_range_comes_from_per_round_ratios():
    base = [10.0, 10.0, 12.0, 10.0, 30.0, 10.0, 10.0, 10.0, 10.0, 10.0, 11.0]
    other = [5.0, 5.0, 6.0, 5.0, 15.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.5]
    # A burst that slows one round slows both variants in it: the ratio stays 2.
    assert rounds.ratio_figures(base, other) == (2.0, [2.0, 2.0])
    # Pairing the extremes of separate runs would have claimed 0.67x to 6x.
    assert (min(base) / max(other), max(base) / min(other)) == (10 / 15, 6.0)


def test_range_is_the_10th_to_90th_percentile():
    base = [10.0] * 11
    other = [10.0 / r for r in (0.5, 0.9, 0.95, 1.0, 1.0, 1.0, 1.0, 1.05, 1.1, 1.2, 3.0)]
    median, (low, high) = rounds.ratio_figures(base, other)
    assert median == 1.0
    assert abs(low - 0.9) < 1e-9 and abs(high - 1.2) < 1e-9  # not 0.5 and 3.0
    assert rounds.contains_one([low, high])
    assert not rounds.contains_one([1.1, 1.3]) and not rounds.contains_one(None)


def test_no_rounds_no_ratio():
    assert rounds.ratio_figures([], []) == (None, None)
    assert rounds.ratio_figures([10.0], [5.0]) == (2.0, [2.0, 2.0])


def test_rounds_interleave_the_variants():
    order = []
    calls = [lambda name=name: order.append(name) or 1.0 for name in "ABC"]
    samples = rounds.interleave(calls, repeats=3, budget_s=60, settle_rounds=1, check=lambda: None)
    # one settling round, then three that count; every other round in reverse order
    assert order == list("ABC" + "CBA" + "ABC" + "CBA")
    assert samples == [[1.0] * 3] * 3


def test_the_order_alternates_so_a_place_in_the_round_costs_every_variant_alike():
    """A cost that follows the place in the round (the first call pays for a cold cache) and
    not the code: with a fixed order it lands on one variant and reads as a speed-up; with the
    order alternating it cancels, and identical code reads "no measurable difference"."""
    from trnlens import speedup

    place = [0]

    def call() -> float:
        place[0] += 1
        return 100.0 + (10.0 if place[0] % 2 == 1 else 0.0)  # the first in a round pays 10%

    samples = rounds.interleave([call, call], repeats=20, budget_s=60, settle_rounds=0,
                                check=lambda: None)  # fmt: skip
    factor, span = rounds.ratio_figures(*samples)
    assert factor == 1.0
    assert speedup.verdict(factor, span) == speedup.SAME
    assert rounds.order(3, 0) == [0, 1, 2] and rounds.order(3, 1) == [2, 1, 0]


def test_the_rounds_stop_after_an_even_number_so_each_variant_leads_as_often():
    samples = rounds.interleave([lambda: 1.0, lambda: 1.0], repeats=20, budget_s=0,
                                settle_rounds=0, check=lambda: None, min_rounds=5)  # fmt: skip
    assert len(samples[0]) == 6


def test_the_speedup_is_the_ratio_of_the_medians_of_the_same_rounds():
    """The table shows each variant's median over the rounds beside the speed-up: they must
    point the same way (seen: baseline 6.66 ms, fixed 30.3 ms, "1.27x")."""
    base = [6.0, 6.66, 7.0, 50.0, 60.0]
    other = [4.0, 5.0, 30.3, 31.0, 32.0]
    # the median of the per-round ratios says 1.5x faster though the medians say slower
    assert statistics.median(b / o for b, o in zip(base, other, strict=True)) == 1.5
    factor, span = rounds.ratio_figures(base, other)
    assert factor == statistics.median(base) / statistics.median(other) == 7.0 / 30.3
    # rounds that contradict each other: the range holds the speed-up, and 1.0
    assert span is not None and span[0] == factor and rounds.contains_one(span)
