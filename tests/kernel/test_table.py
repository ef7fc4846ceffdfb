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


def test_the_magic_says_the_memory_peak_and_growth_in_the_cells_own_lines():
    data = _result("nb.ipynb", True)
    cell = {"index": 1, "id": "rms-cell", "line": 2}
    data["memory"] = {
        "device": "cpu", "steps": 2, "basis": "b", "peak_bytes": 276_832,
        "peak_phase": "optimizer", "peak_line": {"path": "nb.ipynb", "line": 3, "cell": cell},
        "at_peak": {"parameters": 49_792}, "growth_per_step_bytes": 4_000,
        "growth": [{"path": "nb.ipynb", "line": 3, "bytes_per_step": 4_000, "cell": cell}],
    }  # fmt: skip
    assert (
        "  memory: peak 276.8 KB in optimizer (nb.ipynb:cell 2:2) · GROWS 4.0 KB a step at "
        "nb.ipynb:cell 2:2"
    ) in compact(data).splitlines()
    data["memory"] = None
    assert "memory:" not in compact(data)
