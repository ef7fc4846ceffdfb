"""One wording for speed-ups everywhere: CLI, lens, hover and report agree on fixed figures."""

from __future__ import annotations

from trnlens import speedup
from trnlens.cli.render import render_comparison
from trnlens.lsp.analysis import summarize
from trnlens.lsp.hovers import comparison_lines

ADVICE = "to steady these figures, try more steps (--steps)"
WIDE = "the timing pass's times vary widely (1 ms to 9 ms, median 2 ms over 20; spread 400%)"
BUSY = "the machine is busy (load 9.0 on 2 cores): timings are noisy"


def variant(label: str, kind: str, warnings: list[str], noisy: bool) -> dict:
    return {
        "run_id": f"run-{label}",
        "function": {"path": "m.py", "qualname": "step"},
        "variant": {"label": label, "kind": kind},
        "backend": "cpu",
        "device": "cpu",
        "time_basis": "cpu",
        "mode": "inference",
        "dispatches_per_step": 6,
        "device_time_per_step_us": 100.0,
        "timing": {"median_us": 90.0, "min_us": 80.0, "max_us": 120.0, "repeats": 20},
        "stability": {"noisy": noisy},
        "warnings": warnings,
        "error": None,
    }


def comparison(span: list[float], not_comparable: str | None = None) -> dict:
    found = {
        "variants": [
            variant("step", "function", [BUSY], False),
            variant("step (fixed TRN001)", "source", [BUSY, WIDE, ADVICE], True),
        ],
        "baseline": 0,
        "speedups": [1.0, 0.56],
        "speedup_ranges": [[1.0, 1.0], span],
        "speedup_method": "rounds",
        "max_abs_diff": [0.0, None if not_comparable else 0.0],
        "warnings": [],
    }
    if not_comparable:
        found["outputs_not_comparable"] = not_comparable
    return found


def test_a_range_containing_one_is_no_measurable_difference():
    assert speedup.verdict(0.56, [0.2, 1.4]) == "no measurable difference"
    assert speedup.verdict(1.84, [1.6, 2.1]) == "1.84x faster"
    assert speedup.verdict(0.56, [0.5, 0.6]) == "0.56x (slower)"
    assert speedup.verdict(None, None) == "–"


def test_a_change_within_the_noise_threshold_is_no_measurable_difference_whatever_the_range():
    """As Criterion.rs' noise threshold: a narrow range that excludes 1.0 for a 2% effect
    (a place in the round, a warm cache) is no speed-up to claim."""
    assert speedup.verdict(1.02, [1.01, 1.03]) == speedup.SAME
    assert speedup.verdict(0.97, [0.96, 0.98]) == speedup.SAME
    assert speedup.verdict(1 / 1.05, [0.94, 0.96]) == speedup.SAME  # the bound, both ways
    assert speedup.verdict(1.06, [1.055, 1.07]) == "1.06x faster"
    assert speedup.verdict(0.94, [0.93, 0.95]) == "0.94x (slower)"
    assert not speedup.measurable(1.04, None) and speedup.measurable(1.2, None)
    assert not speedup.measurable(None, [1.5, 2.0])


def test_cli_lens_hover_agree_on_the_verdict_and_say_noisy():
    outcome = comparison([0.2, 1.4])
    text = render_comparison(outcome)
    row = next(line for line in text.splitlines() if "fixed TRN001" in line)
    assert "no measurable difference (noisy)" in row and "0.20-1.40x" in row
    answer = summarize("step", outcome)
    assert answer["lens"] == "fixed: no measurable difference · 6/6 dispatches · noisy"
    assert "0.56" not in answer["lens"]  # the figure a reader would take as a regression
    hover = comparison_lines(answer)
    assert "- step (fixed TRN001): no measurable difference (0.20–1.40×) · noisy" in hover


def test_each_variants_warnings_are_printed_once_with_its_name():
    lines = render_comparison(comparison([0.5, 0.6])).splitlines()
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert warnings == [
        f"warning: {BUSY}",  # every variant's: once, unnamed
        f"warning: step (fixed TRN001): {WIDE}",
        f"warning: step (fixed TRN001): {ADVICE}",
    ]
    row = next(line for line in lines if "fixed TRN001" in line)
    assert "0.56x (slower) (noisy)" in row


def test_outputs_not_comparable_replace_the_difference():
    note = "outputs not comparable: the baseline run twice ... gave different outputs"
    outcome = comparison([1.6, 2.1], note)
    row = next(line for line in render_comparison(outcome).splitlines() if "TRN001" in line)
    assert row.rstrip().endswith("not comparable")
    assert f"warning: {note}" in render_comparison(outcome)
    answer = summarize("step", outcome)
    assert "outputs not comparable" in answer["message"] and "max |diff|" not in answer["message"]
    assert note in comparison_lines(answer)
