"""One step as lanes: dispatches (the agent's definition), measured gaps, source sites."""

from __future__ import annotations

from trnlens.report import timeline
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
