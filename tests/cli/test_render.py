"""The CLI's text for a run: the profiled and timing lines say what was left out and why."""

from __future__ import annotations

from trnlens.cli.render import render_result

from tests.agent.conftest import run

RMS = """
import torch


def inputs():
    return (torch.randn(4, 32, 128), torch.randn(128))


# trnlens: inputs=inputs
def naive(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
"""


def test_faulted_profiled_steps_and_page_faults_are_said(make_project):
    root = make_project({"rms.py": RMS})
    result = run(root, [{"path": "rms.py", "qualname": "naive"}])
    assert result["error"] is None, result["error"]
    result["profiled_timing"].update(page_faults=4096, faulted_steps=2, steps=3)
    result["timing"]["page_faults"] = 8192
    text = render_result(result)
    profiled = next(line for line in text.splitlines() if "profiled steps: median" in line)
    assert profiled.endswith(
        "over 3 steps, 4,096 page faults/step "
        "(2 more faulted in memory the profiler's buffers displaced: left out)"
    )
    timing = next(line for line in text.splitlines() if "timing pass (no profiler)" in line)
    assert timing.endswith("calls, 8,192 page faults/step")


def test_a_calm_run_says_nothing_of_faults(make_project):
    root = make_project({"rms.py": RMS})
    result = run(root, [{"path": "rms.py", "qualname": "naive"}])
    result["profiled_timing"]["page_faults"] = 0
    result["profiled_timing"].pop("faulted_steps", None)
    result["timing"]["page_faults"] = 0
    lines = [
        line
        for line in render_result(result).splitlines()
        if "profiled steps: median" in line or "timing pass (no profiler)" in line
    ]
    assert len(lines) == 2 and not any("fault" in line for line in lines)
