"""The launch-bound share over hand-made events: what a tiny dispatch counts when one of its kind
took far longer than the rest (the OS preempted it, or a one-off such as a fresh buffer's zero_)."""

from __future__ import annotations

from types import SimpleNamespace

from trnlens.agent.patterns import LAUNCH_OVERHEAD_SHARE, Checker


def event(name: str, start: float, dur: float):
    return SimpleNamespace(
        name=name,
        time_range=SimpleNamespace(start=start, end=start + dur),
        cpu_parent=None,
        cpu_children=[],
        device_type="DeviceType.CPU",
    )


def step_of(dispatches: list[tuple[str, float]], start: float = 0.0, gap: float = 1.0):
    """A profiled step that dispatches ``(op, µs)`` one after another, ``gap`` µs apart."""
    roots, t = [], start + gap
    for name, dur in dispatches:
        roots.append(event(name, t, dur))
        t += dur + gap
    return [event("ProfilerStep#0", start, t - start), *roots]


def launch_of(steps: list[list]):
    events = [e for step in steps for e in step]
    checker = Checker(events, {}, lambda e: 0.0, 0.0)
    return checker.launch()


def test_a_stalled_tiny_dispatch_is_not_overhead_nor_the_steps_work():
    # A compute-bound step: two 1 ms ops and six tiny zero_ (0.5 µs). In two of the three
    # steps one zero_ stalled for 8 ms: counted whole it would make those steps 80% overhead.
    quiet = [("aten::zero_", 0.5)] * 6 + [("aten::conv2d", 1000.0), ("aten::mm", 1000.0)]
    stalled = [("aten::zero_", 0.5)] * 5 + [("aten::zero_", 8000.0)] + quiet[6:]
    launch = launch_of([step_of(stalled), step_of(quiet, start=20_000), step_of(stalled, 40_000)])
    assert launch["overhead_share"] < 0.05, launch


def test_a_loop_of_tiny_ops_stays_overhead_when_some_are_preempted():
    # 200 adds of 5 µs; in each step 10 of them were preempted for 2 ms: the loop is still its
    # fixed cost, whatever the OS took on top.
    def loop(preempted: set[int]):
        return [("aten::add", 2000.0 if i in preempted else 5.0) for i in range(200)]

    steps = [step_of(loop(set(range(k, 200, 20))), start=k * 100_000) for k in range(3)]
    launch = launch_of(steps)
    assert launch["overhead_share"] >= LAUNCH_OVERHEAD_SHARE, launch
    assert launch["dispatches"] == 200


def test_the_time_before_the_first_dispatch_and_after_the_last_is_not_the_dispatching():
    # a loop of 200 adds of 2 µs, 1 µs apart, then 5 ms parked at the step's end
    def parked(start: float):
        step = step_of([("aten::add", 2.0)] * 200, start=start)
        step[0].time_range.end += 5000.0
        return step

    launch = launch_of([parked(k * 100_000) for k in range(3)])
    assert launch["overhead_share"] == 1.0 and launch["idle_share"] > 0.3, launch


def test_a_kind_is_tiny_by_its_fastest_dispatch_when_most_were_preempted():
    # 200 adds, three in four preempted to 80 µs: the median is over 50 µs, the kind is not
    def loop(start: float):
        return step_of([("aten::add", 5.0 if i % 4 == 0 else 80.0) for i in range(200)], start)

    launch = launch_of([loop(k * 100_000) for k in range(3)])
    assert launch["overhead_share"] >= LAUNCH_OVERHEAD_SHARE, launch
