"""The magic's table says where else its run can be seen, true to the run (issue 42, point 1)."""

from __future__ import annotations

from trnlens.kernel.table import compact


def _result(path: str, notebook: bool) -> dict:
    data = {
        "run_id": "20261207T000000-aaaaaaaa",
        "function": {"path": path, "qualname": "rms"},
        "backend": "cpu",
        "mode": "inference",
        "dispatches_per_step": 6,
        "cpu_time_per_step_us": 120.0,
        "lines": [],
    }
    if notebook:
        data["notebook"] = {"cells": [{"index": 1, "id": "rms-cell", "start": 1, "count": 3}]}
    return data


def test_a_run_of_a_saved_notebook_says_the_editor_shows_it_on_its_cells():
    assert "the editor shows it on the notebook's cells" in compact(_result("nb.ipynb", True))


def test_a_run_from_a_plain_ipython_points_at_the_report_not_at_cells():
    text = compact(_result("<ipython-input-3-0f1e>", False))
    assert "the editor shows it" not in text
    assert "no editor shows it: trnlens report 20261207T000000-aaaaaaaa" in text
