"""Words a user read wrong (issue 42, point 9): a hover's stability line cut inside its bracket,
"noisy per step", a hint's "unprofiled share time per step" (lsp/hovers.py, lsp/format.py,
lsp/hints.py). The progress's "warm-up warm-up 2 of 3" is in test_progress.py, Clear Results
in test_clear_one_file.py."""

from __future__ import annotations

from lsprotocol import types
from trnlens.lsp import hints, hovers

from tests.lsp.test_features import _doc, _result

EVERYWHERE = types.Range(types.Position(0, 0), types.Position(100, 0))


def test_the_hovers_stability_line_never_cuts_inside_a_bracket():
    doc = _doc()
    run = _result()
    run.data["warnings"] = [
        "the timing pass's times vary widely (23.2 ms to 48 ms, median 33 ms over 20; spread "
        "76%): these figures are not stable (likely cause: other work on the machine)",
        "to steady these figures, try more steps (--steps)",
    ]
    run.data["stability"] = {"timing_spread": 0.76, "noisy": True}
    doc.place(run)
    text = hovers.hover(doc, types.Position(3, 4), None).contents.value
    [line] = [row for row in text.splitlines() if row.startswith("**not stable**")]
    # was "(23.2 ms to 48 ms, median 33 ms over 20. To steady ...": the bracket never closed
    assert line.count("(") == line.count(")"), line
    assert "(23.2 ms to 48 ms, median 33 ms over 20; spread 76%)" in line
    assert line.endswith(". To steady these figures, try more steps (trnlens.steps)"), line


def test_the_hover_says_per_step_of_its_figures_not_of_noisy():
    doc = _doc()
    run = _result()
    run.data["stability"] = {"noisy": True}
    doc.place(run)
    text = hovers.hover(doc, types.Position(3, 4), None).contents.value
    header = text.splitlines()[0]
    assert header.endswith("· 3 dispatches per step · noisy"), header  # was "· noisy per step"


def test_a_hints_tooltip_says_what_its_time_is_on_the_unprofiled_basis():
    doc = _doc()
    run = _result()
    run.data["time_scale"] = {"basis": "unprofiled"}
    doc.place(run)
    [first, *_] = hints.inlay_hints(doc, EVERYWHERE)
    assert "f: share of the unprofiled time per step, of the run's " in str(first.tooltip)
    assert "share time" not in str(first.tooltip)  # was "unprofiled share time per step"
