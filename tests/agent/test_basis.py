"""Lines, findings (and modules) on the basis of the headline the lens shows: sums that add up."""

from __future__ import annotations

import math

from trnlens.agent import basis
from trnlens.headline import headline as server_headline
from trnlens.lsp import format as lsp_format
from trnlens.results import Result

from tests.agent.conftest import run

# Two project lines and a training backward: every dispatch of a step has a project line.
RMS = """
import torch


def inputs():
    return (torch.randn(4, 32, 128), torch.randn(128))


# trnlens: inputs=inputs
def naive(x, w, eps=1e-6):
    v = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(v + eps) * w
"""


def test_an_inflating_profiler_puts_the_parts_on_the_unprofiled_median():
    # the lens shows 2.67 ms unprofiled; the lines were profiled at 43 ms in all
    name, total = basis.headline(38_000.0, {"median_us": 2_670.0})
    assert (name, total) == ("unprofiled", 2_670.0)
    lines = [{"device_us": 30_000.0}, {"device_us": 13_000.0}]
    scale = basis.scale(name, total, profiled_total_us=38_000.0, rows_total_us=43_000.0)
    basis.rescale_rows(lines, ("device_us",), scale["factor"])
    assert math.isclose(sum(line["device_us"] for line in lines), 2_670.0)
    assert lines[0]["profiled_device_us"] == 30_000.0
    basis.rescale_rows(lines, ("device_us",), scale["factor"])  # a second call changes nothing
    assert math.isclose(sum(line["device_us"] for line in lines), 2_670.0)
    # a finding from the line-attribution pass: 143 ms of its 126 ms... no longer more than all
    findings = [{"time_us": 143_000.0, "share": 0.6}]
    basis.rescale_findings(findings, total)
    assert findings == [{"time_us": 0.6 * 2_670.0, "share": 0.6, "profiled_time_us": 143_000.0}]


def test_the_headline_is_the_unprofiled_median_however_calm_the_profile():
    """One figure run after run: a calm profile (1.1x) no longer switches the headline to the
    profiled time (the lens read "1.44 ms unprofiled" then "1.13 ms CPU (ops)", issue 30)."""
    for overhead in (1.1, 14.2):
        data = {"timing": {"median_us": 800.0}, "device_time_per_step_us": 900.0,
                "stability": {"profiler_overhead": overhead}, "time_basis": "cpu"}  # fmt: skip
        assert basis.headline(900.0, data["timing"]) == ("unprofiled", 800.0)
        shown = server_headline(data)
        assert (shown.basis, shown.time_us) == ("unprofiled", 800.0)
    # without a timing pass: the profiled time, on both sides alike
    assert basis.headline(900.0, None) == ("profiled", 900.0)
    alone = server_headline({"device_time_per_step_us": 900.0, "time_basis": "cpu"})
    assert (alone.basis, alone.time_us, alone.text) == ("profiled", 900.0,
                                                        "900 µs CPU (ops), profiled")  # fmt: skip


def test_parts_that_cover_only_part_of_the_step_keep_their_share():
    # lines that cover only part of the step keep their share of the whole
    scale = basis.scale("profiled", 900.0, profiled_total_us=1_000.0, rows_total_us=500.0)
    assert scale == {"basis": "profiled", "total_us": 900.0, "factor": 0.9}


def test_a_run_adds_up_to_the_headline_the_lens_shows(make_project):
    root = make_project({"rms.py": RMS})
    result = run(root, [{"path": "rms.py", "qualname": "naive"}], steps=3, repeats=5)
    assert result["error"] is None, result["error"]
    scale = result["time_scale"]
    name, total = basis.headline(result["device_time_per_step_us"], result["timing"])
    assert scale["basis"] == name == "unprofiled" and scale["total_us"] == total
    assert server_headline(result).time_us == total
    # the lens shows that same figure
    shown = lsp_format.headline(Result(result))
    assert shown.startswith(lsp_format.duration(total) + " unprofiled")
    # every dispatch has one of the two project lines: the lines add up to the headline
    lines = result["lines"]
    assert len(lines) == 2 and sum(line["dispatches"] for line in lines) == 6
    assert math.isclose(sum(line["device_us"] for line in lines), total, rel_tol=1e-9)
    for finding in result["findings"]:
        assert finding["time_us"] <= total * (1 + 1e-9)


BLOCK = """
import torch
from torch import nn


def make():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)), torch.randn(8, 16)


# trnlens: inputs=make
def forward(model, x):
    return model(x)
"""


def test_the_backward_training_mode_adds_has_its_own_row(make_project):
    root = make_project({"block.py": BLOCK})
    result = run(root, [{"path": "block.py", "qualname": "forward"}], mode="training")
    assert result["error"] is None, result["error"]
    lines = result["lines"]
    added = [line for line in lines if line.get("label") == "backward added by training mode"]
    assert len(added) == 1 and added[0]["line"] == result["function"]["line"]
    assert added[0]["dispatches"] > 0
    # every dispatch of the step is on a row: the call's line, or the added backward's
    assert sum(line["dispatches"] for line in lines) == result["dispatches_per_step"]


def test_modules_and_frames_take_the_same_basis_as_the_lines(make_project):
    """Issue 22 with issue 21: the module tree and the frames share the lines' basis, so the
    profiled model's module is the whole headline and its children add up to it."""
    root = make_project({"block.py": BLOCK})
    result = run(root, [{"path": "block.py", "qualname": "forward"}], steps=3, repeats=5)
    assert result["error"] is None, result["error"]
    total = result["time_scale"]["total_us"]
    modules = {m["name"]: m for m in result["modules"]}
    model = modules["model"]  # every dispatch of the step ran inside it
    assert math.isclose(model["total_time_per_step_us"], total, rel_tol=1e-6)
    children = [m for name, m in modules.items() if name.count(".") == 1]
    assert len(children) == 3
    assert math.isclose(sum(m["total_time_per_step_us"] for m in children), total, rel_tol=1e-6)
    frames = result["frames"] + [result["frames_rest"]]
    assert math.isclose(sum(f["self_time_per_step_us"] for f in frames), total, rel_tol=1e-6)
