"""One step as lanes: dispatches (the agent's definition), measured gaps, source sites."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from trnlens.agent import events as ev
from trnlens.report import svg, timeline
from trnlens.report.trace import read_step

from tests.report.helpers import naive_step, op, step, write_trace

NAIVE_OPS = ["aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::mul"]


def result(**extra) -> dict:
    base = {
        "function": {"path": "m.py", "qualname": "f", "line": 3},
        "time_basis": "cpu",
        "lines": [
            {"path": "m.py", "line": 4, "ops": {"aten::pow": 1, "aten::mean": 1}},
            {"path": "m.py", "line": 5, "ops": {"aten::add": 1, "aten::rsqrt": 1, "aten::mul": 2}},
        ],
    }
    return {**base, **extra}


def build(tmp_path, events, res):
    return timeline.build(read_step(write_trace(tmp_path / "t.json", events)), res, "f")


def bars(t, kind):
    return [b for b in t.bars if b.kind == kind]


def test_dispatches_and_the_gaps_between_them(tmp_path):
    t = build(tmp_path, naive_step(1, 1000, gap=25), result())
    assert [b.name for b in bars(t, "dispatch")] == NAIVE_OPS
    assert t.dispatches == 6 and t.gap_count == 5 and t.gap_total_us == 125
    assert [b.dur for b in bars(t, "gap")] == [25] * 5
    assert bars(t, "dispatch")[0].start == 5  # from the step's start
    nested = bars(t, "op")
    assert [(b.name, b.row) for b in nested] == [("aten::sum", 1), ("aten::div_", 1)]
    assert bars(t, "dispatch")[0].shapes == [[4, 512, 2048], []]


def test_recorded_dispatch_sites_give_each_dispatch_its_line(tmp_path):
    sites = [["m.py", 4], ["m.py", 4], ["m.py", 5], ["m.py", 5], ["m.py", 5], ["m.py", 6]]
    t = build(tmp_path, naive_step(1, 0), result(dispatch_sites=sites))
    assert [b.site for b in bars(t, "dispatch")] == [tuple(s) for s in sites]
    assert not any("matched" in note for note in t.notes)
    # the Python lane: the function, then one span per run of dispatches from the same line
    assert [(b.name, b.row) for b in t.bars if b.lane == "python"] == [
        ("f", 0), ("line 4", 1), ("line 5", 1), ("line 6", 1),
    ]  # fmt: skip


def test_without_sites_dispatches_are_matched_to_lines_by_op_name(tmp_path):
    t = build(tmp_path, naive_step(1, 0), result())
    assert [b.site[1] for b in bars(t, "dispatch")] == [4, 4, 5, 5, 5, 5]
    assert any("matched to dispatches by op name" in note for note in t.notes)


def test_compiled_code_counts_on_the_function(tmp_path):
    events = [
        step(1, 0, 500),
        op("Torch-Compiled Region: 0/0", 10, 400, cat="user_annotation"),
        op("## Call CompiledFxGraph abc ##", 20, 300, cat="user_annotation"),
    ]
    t = build(tmp_path, events, result(lines=[]))
    assert [b.name for b in bars(t, "dispatch")] == ["## Call CompiledFxGraph abc ##"]
    assert bars(t, "dispatch")[0].site == ("m.py", 3)


def test_on_the_cpu_the_device_lane_shows_the_ops_doing_the_work(tmp_path):
    t = build(tmp_path, naive_step(1, 0), result())
    device = [b.name for b in t.bars if b.lane == "device"]
    assert device == ["aten::pow", "aten::sum", "aten::div_", "aten::add", "aten::rsqrt",
                      "aten::mul", "aten::mul"]  # fmt: skip
    assert "cpu backend" in t.empty["runtime"]


def test_cuda_runtime_and_kernels_get_their_own_lanes(tmp_path):
    events = [
        step(1, 0, 500),
        op("aten::add", 10, 50),
        op("cudaLaunchKernel", 20, 10, cat="cuda_runtime"),
        op("vectorized_elementwise_kernel", 40, 30, cat="kernel", tid=7),
    ]
    t = build(tmp_path, events, result(time_basis="device", lines=[]))
    assert [b.name for b in t.bars if b.lane == "runtime"] == ["cudaLaunchKernel"]
    assert [b.name for b in t.bars if b.lane == "device"] == ["vectorized_elementwise_kernel"]
    assert t.dispatches == 1


def test_backward_runs_say_whose_backward_they_are(tmp_path):
    engine = "autograd::engine::evaluate_function: "
    events = [
        step(1, 0, 1000),
        op("aten::mul", 10, 100),  # forward, line 4
        op("trnlens.line:1", 200, 700, cat="user_annotation"),  # the backward() call
        op(engine + "MulBackward0", 210, 300, cat="cpu_op"),
        op("MulBackward0", 215, 290, cat="cpu_op"),
        op("aten::mul", 220, 100),  # its dispatch: on line 4, where its forward ran
        op(engine + "torch::autograd::AccumulateGrad", 600, 200, cat="cpu_op"),
        op("aten::add_", 610, 100),  # no forward made it: stays on the backward() line
    ]
    sites = [["m.py", 4], ["m.py", 4], ["m.py", 5]]
    t = build(tmp_path, events, result(dispatch_sites=sites))
    assert [b.name for b in bars(t, "dispatch")] == ["aten::mul", "aten::mul", "aten::add_"]
    lines = [(b.name, b.site, b.note) for b in t.bars if b.lane == "python" and b.row == 1]
    assert [(name, site) for name, site, _ in lines] == [
        ("line 4", ("m.py", 4)), ("backward · line 4", ("m.py", 4)),
        ("backward · line 5", ("m.py", 5)),
    ]  # fmt: skip
    assert "the line whose forward ops made its nodes" in lines[1][2] and lines[0][2] is None


def memory_of(curve: dict) -> dict:
    return {
        "device": "cpu", "steps": 2, "basis": "torch's memory timeline", "peak_bytes": 400,
        "peak_phase": "backward", "peak_line": {"path": "m.py", "line": 5}, "at_peak": {},
        "growth_per_step_bytes": 0, "growth": [], "curve": {"step": 1, **curve},
    }  # fmt: skip


def test_the_memory_lane_draws_the_curve_at_this_steps_dispatches_when_they_are_the_same(
    tmp_path,
):
    levels = [100, 300, 200, 400, 150, 120]  # from each of the 6 dispatches to the next
    same = ev.dispatch_digest(SimpleNamespace(name=name) for name in NAIVE_OPS)
    memory = memory_of({"bytes": [1] * 4, "dispatch_bytes": levels, "dispatch_digest": same})
    t = build(tmp_path, naive_step(1, 1000, gap=25), result(backend="cpu", memory=memory))
    spans = [b for b in t.bars if b.lane == "memory"]
    starts = [b.start for b in bars(t, "dispatch")]
    # the first span from the step's start, each to the next dispatch, the last to the step's end
    assert [b.start for b in spans] == [0, *starts[1:]]
    assert [b.start + b.dur for b in spans] == pytest.approx([*starts[1:], t.duration_us])
    assert [b.level for b in spans] == [size / 400 for size in levels]
    assert bars(t, "memory peak") == [spans[3]] and spans[3].site == ("m.py", 5)
    assert spans[3].name == "peak 400 B in backward (m.py:5)"
    assert "at this step's own dispatches" in spans[0].note

    # other dispatches (another digest): the slices of the pass's own time, scaled
    memory["curve"]["dispatch_digest"] = "0" * 16
    t = build(tmp_path, naive_step(1, 1000, gap=25), result(backend="cpu", memory=memory))
    spans = [b for b in t.bars if b.lane == "memory"]
    assert len(spans) == 4 and spans[0].start == 0
    assert "4 slices of its time scaled" in spans[0].note


def test_the_memory_lane_draws_the_curve_with_its_peak_at_its_line(tmp_path):
    curve = [100, 100, 300, 200, 400, 150]  # 6 slices of the peak's step
    memory = memory_of({"bytes": curve})  # an older run: no curve at its dispatches
    t = build(tmp_path, naive_step(1, 1200, gap=0), result(backend="cpu", memory=memory))
    slices = [b for b in t.bars if b.lane == "memory"]
    # the slices tile the step: equal widths, scaled from the pass's own step
    assert [b.start for b in slices] == pytest.approx([i * t.duration_us / 6 for i in range(6)])
    assert [b.level for b in slices] == [size / 400 for size in curve]
    peak = bars(t, "memory peak")
    assert peak == [slices[4]] and peak[0].site == ("m.py", 5)
    assert all(b.site is None for b in slices if b is not peak[0])
    assert slices[2].name == "live 300 B" and "step 2 of 2" in slices[2].note
    assert t.rows["memory"] == timeline.MEMORY_ROWS
    assert any(note.startswith("Memory lane: the live bytes") for note in t.notes)
    # a multi-rank run's lane is rank 0's memory pass, and says so
    ranked = build(tmp_path, naive_step(1, 1200, gap=0),
                   result(backend="cpu", memory={**memory, "rank": 0}))  # fmt: skip
    assert "rank 0's memory pass's step 2 of 2" in bars(ranked, "memory")[0].note

    drawn, details = svg.timelines([t])
    assert 'class="lane lane-memory"' in drawn and 'class="ev memory peak"' in drawn
    # heights in proportion to the bytes: the peak's slice the lane's height less its margins
    heights = [float(h) for h in re.findall(r'class="ev memory[^"]*".*?height="([\d.]+)"', drawn)]
    lane = timeline.MEMORY_ROWS * svg.ROW_H - 4
    assert heights == [pytest.approx(lane * size / 400, abs=0.01) for size in curve]
    assert {"path": "m.py", "line": 5}.items() <= details[len(details) - 2].items()


def test_the_memory_lane_says_why_it_is_empty(tmp_path):
    t = build(tmp_path, naive_step(1, 1000), result(backend="cpu", memory=None))
    assert t.empty["memory"].startswith("not measured: this run had no memory pass")
    t = build(tmp_path, naive_step(1, 1000), result(backend="xla"))
    assert t.empty["memory"] == (
        "not measured over time: the xla backend's memory is its runtime's, not torch's allocator"
    )
    assert not [b for b in t.bars if b.lane == "memory"]
