"""Reading one step out of a chrome trace: streamed, bounded, nested by time."""

from __future__ import annotations

import pytest
from trnlens.report.trace import TraceError, read_step

from tests.report.helpers import naive_step, op, step, write_trace


def test_the_median_step_and_only_its_events(tmp_path):
    events = (
        naive_step(1, 0, gap=10) + naive_step(2, 10_000, gap=50) + naive_step(3, 20_000, gap=30)
    )
    read = read_step(write_trace(tmp_path / "t.json", events))
    assert [s.name for s in read.steps] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert read.step.name == "ProfilerStep#3"  # durations 665, 905, 785: the median
    assert all(20_000 <= e.ts <= 20_000 + read.step.dur for e in read.events)
    assert len(read.events) == 8 and not read.truncated
    assert read.names == {"1": "python"}


def test_events_nest_by_time_within_a_thread(tmp_path):
    read = read_step(write_trace(tmp_path / "t.json", naive_step(1, 0)))
    mean = next(e for e in read.events if e.name == "aten::mean")
    assert [c.name for c in mean.cpu_children] == ["aten::sum", "aten::div_"]
    assert all(c.cpu_parent is mean and c.depth == 1 for c in mean.cpu_children)
    assert next(e for e in read.events if e.name == "aten::pow").cpu_parent is None


def test_a_busy_step_is_bounded_and_says_how_much_was_left_out(tmp_path):
    events = [step(1, 0, 100_000)] + [op("aten::add", 10 + i * 5, 2) for i in range(500)]
    read = read_step(write_trace(tmp_path / "t.json", events), max_events=120)
    assert len(read.events) == 120 and read.dropped == 380 and read.truncated
    assert read.total_events == 502  # metadata + step + ops, all counted while streaming


def test_a_trace_without_steps_keeps_every_event(tmp_path):
    read = read_step(
        write_trace(tmp_path / "t.json", [op("aten::add", 0, 5), op("aten::mul", 9, 5)])
    )
    assert read.step is None and len(read.events) == 2


def test_malformed_or_missing_traces_raise_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": ')
    with pytest.raises(TraceError, match="bad.json is not a readable chrome trace"):
        read_step(bad)
    with pytest.raises(TraceError, match="cannot read"):
        read_step(tmp_path / "missing.json")


def test_events_of_the_wrong_shape_are_skipped(tmp_path):
    events = [step(1, 0, 1000), op("aten::add", 10, 5), {"ph": "X", "name": 3, "ts": "x"}, 7]
    read = read_step(write_trace(tmp_path / "t.json", events))
    assert [e.name for e in read.events] == ["aten::add"]
