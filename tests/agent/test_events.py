"""Dispatch counting on hand-made event trees: the cases real torch makes hard to set up."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from trnlens.agent import events


@dataclass
class Event:
    name: str
    start: int
    cpu: float = 1.0
    children: list = field(default_factory=list)
    cpu_parent: Event | None = None

    def __post_init__(self):
        self.time_range = SimpleNamespace(start=self.start, end=self.start + 100)
        self.self_cpu_time_total = self.cpu
        self.cpu_time_total = self.cpu

    @property
    def cpu_children(self):
        return self.children


def tree(root: Event) -> list[Event]:
    out, stack = [], [root]
    while stack:
        event = stack.pop()
        out.append(event)
        for child in event.children:
            child.cpu_parent = event
            stack.append(child)
    return out


def test_aten_inside_aten_is_one_dispatch():
    step = Event("ProfilerStep#1", 0, children=[
        Event("aten::mean", 1, children=[Event("aten::sum", 2), Event("aten::div_", 3)]),
        Event("aten::add", 4),
    ])  # fmt: skip
    roots = events.dispatch_roots(tree(step))
    assert [r.name for r in roots] == ["aten::mean", "aten::add"]


def test_nested_graphs_count_each_and_hide_their_aten_ops():
    inner = Event("Torch-Compiled Region: 2/0", 20, children=[
        Event("## Call CompiledFxGraph b", 21, children=[Event("aten::mm", 22)]),
    ])  # fmt: skip
    outer = Event("Torch-Compiled Region: 1/0", 10, children=[
        Event("## Call CompiledFxGraph a", 11), inner,
    ])  # fmt: skip
    step = Event("ProfilerStep#1", 0, children=[outer])
    assert [r.name for r in events.dispatch_roots(tree(step))] == [
        "## Call CompiledFxGraph a", "## Call CompiledFxGraph b",
    ]  # fmt: skip


def test_a_region_without_inductor_graphs_counts_once():
    # Another compile backend (neuron's): a region, its own kernels, no CompiledFxGraph.
    region = Event("Torch-Compiled Region: 0/0", 1, children=[Event("neuron::kernel", 2)])
    step = Event("ProfilerStep#1", 0, children=[region, Event("aten::add", 5)])
    assert [r.name for r in events.dispatch_roots(tree(step))] == [
        "Torch-Compiled Region: 0/0", "aten::add",
    ]  # fmt: skip


def test_line_table_sums_per_site_and_per_step():
    a, b = Event("aten::pow", 1, cpu=2.0), Event("aten::mul", 2, cpu=4.0)
    pairs = [(("m.py", 3), a), (("m.py", 4), b), (("m.py", 4), b), (None, a)]
    table = events.line_table(pairs, lambda e: e.cpu_time_total, steps=2)
    assert table == [
        {"path": "m.py", "line": 3, "cpu_us": 1.0, "device_us": 1.0, "dispatches": 0.5,
         "ops": {"aten::pow": 0.5}},
        {"path": "m.py", "line": 4, "cpu_us": 4.0, "device_us": 4.0, "dispatches": 1,
         "ops": {"aten::mul": 1.0}},
    ]  # fmt: skip
