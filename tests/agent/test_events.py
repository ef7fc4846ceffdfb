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


def test_kernels_are_not_counted_twice_in_the_op_table():
    """A CUDA kernel's time is in its launching op's self device time and in its own event.

    Real torch FunctionEvents (not hand-made ones): the double count came from torch's own
    property definitions, so the test must use them.
    """
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent
    from trnlens.agent.backends.base import Backend

    step = FunctionEvent(id=1, name="ProfilerStep#1", thread=0, start_us=0, end_us=200,
                         use_device="cuda")  # fmt: skip
    mul = FunctionEvent(id=2, name="aten::mul", thread=0, start_us=5, end_us=100,
                        use_device="cuda")  # fmt: skip
    mul.append_kernel("elementwise_kernel", 0, 50)
    kernel = FunctionEvent(id=3, name="elementwise_kernel", thread=7, start_us=20, end_us=70,
                           use_device="cuda", device_type=DeviceType.CUDA)  # fmt: skip
    all_events = [step, mul, kernel]
    backend = Backend(torch=None, options={})
    assert kernel.self_device_time_total == mul.self_device_time_total == 50  # torch's view

    ops = events.op_table(all_events, backend.self_device_us, backend.device_total_us, steps=1)
    assert [op["name"] for op in ops] == ["aten::mul"]
    assert sum(op["self_device_us"] for op in ops) == 50
    assert events.kernel_table(all_events, steps=1) == [
        {"name": "elementwise_kernel", "calls": 1, "device_us": 50.0}
    ]
    assert [e.name for e in all_events if events.is_host(e)] == ["ProfilerStep#1", "aten::mul"]


def test_a_step_is_counted_once_on_cuda_where_the_device_repeats_it_as_an_annotation():
    # CUDA's profiler records each ProfilerStep#N twice: the host range and a device-side
    # gpu_user_annotation of the same name. Per-step figures divide by the host's steps only.
    host = [Event(f"ProfilerStep#{i}", i * 1000) for i in range(3)]
    for step in host:
        step.device_type = "DeviceType.CPU"
    device = [Event(f"ProfilerStep#{i}", i * 1000 + 5) for i in range(3)]
    for step in device:
        step.device_type = "DeviceType.CUDA"
    found = events.step_events(host + device)
    assert found == host
    assert len(events.roots_by_step(host + device)) == 3
