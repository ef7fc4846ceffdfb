"""The lens's change against the baseline (lsp/watching.py ``change_label``): its words never
contradict its own figure (issue 42, point 7: "no change vs previous (+768%, within noise)")."""

from __future__ import annotations

import itertools
import re

from trnlens import history
from trnlens.lsp.watching import change_label

from ..test_history import run


def test_a_768_percent_slowdown_on_an_unreliable_run_says_so_and_why():
    # The case: the earlier run's range took a burst of load (0.9 to 9 ms around its
    # 1 ms median), so +768% fell within it and read "no change ... within noise".
    base = run(1, 1_000.0, 900.0, 9_000.0)
    later = run(2, 8_680.0, 8_600.0, 8_760.0)
    found = history.change(base, later)
    assert found.verdict == "noisy" and not found.regression
    assert change_label(found, "previous") == (
        "+768% vs previous (unreliable: the previous run: its timing spread widely)"
    )
    busy = run(3, 8_680.0, 8_600.0, 8_760.0, warnings=["the machine is busy (load 9 on 2)"])
    label = change_label(history.change(run(4, 1_000.0, 990.0, 1_010.0), busy), "main")
    assert label == "+768% vs main (unreliable: the machine was busy)"


def test_within_noise_and_no_change_are_said_only_where_the_tests_say_them():
    assert change_label(history.change(run(1, 100.0, 95.0, 105.0), run(2, 104.0, 99.0, 109.0)),
                        "previous") == "no change vs previous (+4%, within noise)"  # fmt: skip
    # under the threshold but beyond the (narrow) spreads: the threshold is the reason given
    narrow = history.change(run(1, 100.0, 99.9, 100.1), run(2, 108.0, 107.9, 108.1))
    assert change_label(narrow, "previous") == (
        "no change vs previous (+8%, under the 10% threshold)"
    )
    # over the threshold, within two reliable runs' spread: the figure, never "no change"
    wide = history.change(run(1, 100.0, 95.0, 140.0), run(2, 130.0, 128.0, 132.0))
    assert change_label(wide, "previous") == "+30% vs previous (within noise)"


def test_no_label_calls_a_change_over_the_threshold_no_change():
    """Every pair over a grid of medians and spreads: "no change" only under the threshold,
    "within noise" only within both runs' spread, "unreliable" only for an unreliable run."""
    for median, spread, base_spread, busy in itertools.product(
        (20.0, 60.0, 100.0, 105.0, 130.0, 190.0, 868.0),
        (0.01, 0.3, 0.9, 4.0),
        (0.01, 0.45, 0.9),
        (False, True),
    ):
        base = run(1, 100.0, 100.0 * (1 - base_spread / 2), 100.0 * (1 + base_spread / 2))
        warnings = ["the machine is busy (load 9 on 2)"] if busy else []
        half = median * spread / 2
        later = run(2, median, median - half, median + half, warnings=warnings)
        found = history.change(base, later)
        label = change_label(found, "previous")
        pct = int(re.search(r"[+−±](\d+)%", label).group(1))
        assert pct == abs(round(100 * found.ratio)), label
        if "no change" in label:
            assert pct <= 10, label
        if "within noise" in label:
            assert abs(found.delta_us) <= found.spread_us and not found.noisy or pct <= 10, label
        if "unreliable" in label:
            assert found.noisy, label
