"""One measured step as lanes, after Neuron Explorer's: Python, dispatch, runtime, device.

- python: ``python_function`` events when the trace has them (``with_stack``); otherwise the
  profiled function and, under it, the source lines each run of dispatches came from (from the
  run's line attribution): what Python was executing, not a guess at frames the trace lacks;
- dispatch: what the framework handed over: dispatch roots (``agent.events.dispatch_roots``, the
  same definition as the headline count) on the first row, the aten ops they called below, and
  the idle gaps between consecutive dispatches, each measured;
- runtime: CUDA runtime/driver calls, Neuron runtime events; on the CPU backend, a multi-rank
  run's collectives as gloo runs them on its threads (``gloo:all_reduce``: transfer and wait);
- device: CUDA kernels and copies, Neuron hardware execution; on the CPU backend the host is the
  device, so the innermost ops of each dispatch (the ones doing the work) are shown there;
- memory: the live bytes over the step, from the run's memory pass (``agent/memorypass.py``):
  its own run of the step, with every allocation recorded, drawn at this step's dispatches
  when both passes ran the same ones (their digests agree; the passes' times differ, the
  tracer slowing the memory pass's Python), else in equal slices of its time scaled to this
  step's; each span as high as the most that was live in it, the peak linked to its line.

Times are microseconds from the step's start.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from trnlens import memoryfigures, units
from trnlens.agent import events as ev
from trnlens.agent import memorypass
from trnlens.agent.backward.links import node_of
from trnlens.report.trace import StepTrace, TraceEvent

LANES = (
    ("python", "Python"),
    ("dispatch", "Framework dispatch"),
    ("runtime", "Runtime / device interaction"),
    ("device", "Device execution"),
    ("memory", "Memory, live bytes"),
)
MEMORY_ROWS = 3  # the memory lane's height, in rows: its slices' heights are their bytes
MAX_NESTED_ROWS = 3  # aten ops below a dispatch shown in the dispatch lane
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "overhead"}
_DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}


@dataclass
class Bar:
    lane: str
    row: int
    start: float
    dur: float
    name: str
    kind: str  # dispatch, op, gap, frame, line, runtime, device
    shapes: list | None = None
    site: tuple[str, int] | None = None
    note: str | None = None
    level: float | None = None  # a memory slice's height, a fraction of the lane's


@dataclass
class Timeline:
    label: str
    step_name: str | None
    duration_us: float
    bars: list[Bar] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)  # lane -> rows used
    empty: dict[str, str] = field(default_factory=dict)  # lane -> why it has nothing
    dispatches: int = 0
    gap_total_us: float = 0.0
    gap_count: int = 0
    notes: list[str] = field(default_factory=list)


def lane_of(event: TraceEvent) -> str | None:
    cat = event.cat.lower()
    name = event.name.lower()
    if cat == "python_function":
        return "python"
    if name.startswith("gloo:"):
        # A collective's work on gloo's own threads (a multi-rank run): the communication the
        # step waited on, which the dispatch lane does not show (the launch is microseconds).
        return "runtime"
    if cat in _RUNTIME_CATS or "runtime" in cat or "neuron_rt" in cat or "neuron_rt" in name:
        return "runtime"
    if cat in _DEVICE_CATS or "neuron_hw" in cat or name == "nc_exec_running" or "device" in cat:
        return "device"
    if cat in ("cpu_op", "user_annotation", "") or ev.is_aten(event):
        return "dispatch"
    return None


def build(trace: StepTrace, result: dict, label: str) -> Timeline:
    step = trace.step
    origin = step.start if step else min((e.ts for e in trace.events), default=0.0)
    duration = step.dur if step else max((e.end - origin for e in trace.events), default=0.0)
    timeline = Timeline(label, step.name if step else None, duration)
    if step is None:
        timeline.notes.append("the trace has no ProfilerStep events: all its events are shown")
    if trace.truncated:
        timeline.notes.append(
            f"the step has more than {len(trace.events):,} events: the first "
            f"{len(trace.events):,} are drawn, {trace.dropped:,} left out (figures come from the "
            "whole run)"
        )
    by_lane: dict[str, list[TraceEvent]] = defaultdict(list)
    for event in trace.events:
        lane = lane_of(event)
        if lane is not None and not ev.is_bookkeeping(event):
            by_lane[lane].append(event)
    roots = ev.dispatch_roots(by_lane["dispatch"])
    sites, how = _sites(roots, result)
    if how:
        timeline.notes.append(how)
    timeline.dispatches = len(roots)

    def rel(t: float) -> float:
        return t - origin

    # dispatch lane: roots, the ops under them, the gaps between them
    root_ids = {id(r): i for i, r in enumerate(roots)}
    recorded_shapes = _recorded_shapes(roots, result)
    for root, site, shapes in zip(roots, sites, recorded_shapes, strict=True):
        timeline.bars.append(
            Bar("dispatch", 0, rel(root.ts), root.dur, root.name, "dispatch",
                _shapes(root) or shapes, site)
        )  # fmt: skip
    for event in by_lane["dispatch"]:
        if id(event) in root_ids or not ev.is_aten(event):
            continue
        root, depth = _root_of(event, root_ids)
        if root is None or depth > MAX_NESTED_ROWS:
            continue
        site = sites[root_ids[id(root)]] if root is not None else None
        timeline.bars.append(
            Bar("dispatch", depth, rel(event.ts), event.dur, event.name, "op", _shapes(event), site)
        )
    for before, after in zip(roots, roots[1:], strict=False):
        gap = after.ts - before.end
        if gap > 0:
            timeline.gap_total_us += gap
            timeline.gap_count += 1
            timeline.bars.append(
                Bar("dispatch", 0, rel(before.end), gap, "idle", "gap",
                    note=f"between {before.name} and {after.name}: no dispatch running")
            )  # fmt: skip
    # python lane
    if by_lane["python"]:
        for event in by_lane["python"]:
            depth = sum(1 for a in _ancestors(event) if lane_of(a) == "python")
            timeline.bars.append(
                Bar("python", depth, rel(event.ts), event.dur, event.name, "frame")
            )
    elif roots:
        timeline.bars.extend(_python_from_sites(roots, sites, result, rel))
        timeline.notes.append(
            "Python lane: the profiled function and the line each run of dispatches came from "
            "(line attribution); the trace has no Python frames"
        )
    else:
        timeline.empty["python"] = "no dispatches in this step"
    # runtime and device lanes
    for lane, kind in (("runtime", "runtime"), ("device", "device")):
        for event in by_lane[lane]:
            timeline.bars.append(
                Bar(lane, 0, rel(event.ts), event.dur, event.name, kind, _shapes(event))
            )
    if not by_lane["runtime"]:
        timeline.empty["runtime"] = (
            "none: on xla the host traces lazy ops and runs each graph at the step's sync "
            "(the XLA section has its compile and execute time)"
            if result.get("backend") == "xla"
            else "none: the cpu backend runs ops on the host"
            if result.get("time_basis") == "cpu"
            else "the trace has no runtime events"
        )
    if not by_lane["device"]:
        if result.get("time_basis") == "cpu":
            for root, site, shapes in zip(roots, sites, recorded_shapes, strict=True):
                for leaf in _leaves(root):
                    leaf_shapes = _shapes(leaf) or (shapes if leaf is root else None)
                    timeline.bars.append(
                        Bar("device", 0, rel(leaf.ts), leaf.dur, leaf.name, "device",
                            leaf_shapes, site, note="CPU execution (the host is the device)")
                    )  # fmt: skip
        else:
            timeline.empty["device"] = "the trace has no device events"
    for bar in timeline.bars:
        timeline.rows[bar.lane] = max(timeline.rows.get(bar.lane, 0), bar.row + 1)
    _memory_lane(timeline, result, [rel(r.ts) for r in roots], ev.dispatch_digest(roots))
    for lane, _title in LANES:
        if lane not in timeline.rows and lane not in timeline.empty:
            timeline.empty[lane] = "no events"
    return timeline


def _memory_lane(timeline: Timeline, result: dict, starts: list[float], digest: str) -> None:
    """``starts``: this step's dispatches' start times, ``digest`` theirs (events.py)."""
    memory = memoryfigures.read(result)
    curve = memory.curve if memory is not None else None
    duration = timeline.duration_us
    if memory is None or curve is None or not curve.bytes or duration <= 0:
        timeline.empty["memory"] = (
            f"not measured over time: the {result.get('backend')} backend's memory is its "
            "runtime's, not torch's allocator"
            + (
                " (the XLA section says what the step holds on the device)"
                if isinstance(result.get("xla"), dict)
                else ""
            )
            if memorypass.unsupported(str(result.get("backend")))
            else "not measured: this run had no memory pass (--no-memory, or an older run)"
        )
        return
    step = f"the memory pass's step {curve.step + 1} of {memory.steps}"
    if memory.rank is not None:  # a multi-rank run's: rank 0's, as the figures beside it
        step = f"rank {memory.rank}'s {step[4:]}"
    if curve.dispatch_digest == digest and len(curve.dispatch_bytes) == len(starts) > 0:
        # the same dispatches in both passes: each level drawn from its dispatch to the next
        spans = list(zip([0.0, *starts[1:]], [*starts[1:], duration], strict=True))
        levels, how = curve.dispatch_bytes, "at this step's own dispatches (the same ones)"
    else:
        width = duration / len(curve.bytes)
        spans = [(i * width, (i + 1) * width) for i in range(len(curve.bytes))]
        levels = curve.bytes
        how = (
            f"in {len(curve.bytes)} slices of its time scaled to this step's (its dispatches "
            "differ from this step's, so they cannot be placed at them)"
        )
    top = max(levels) or 1
    peak = levels.index(top)
    line = memory.peak_line
    for index, ((start, end), size) in enumerate(zip(spans, levels, strict=True)):
        at_peak = index == peak
        timeline.bars.append(
            Bar("memory", 0, start, end - start,
                memoryfigures.peak_words(memory) if at_peak else f"live {units.data_size(size)}",
                "memory peak" if at_peak else "memory",
                site=(line.path, line.line) if at_peak and line and line.path and line.line
                else None,
                note=f"{step}, {how}", level=size / top)
        )  # fmt: skip
    timeline.rows["memory"] = MEMORY_ROWS
    timeline.notes.append(
        f"Memory lane: the live bytes of {step} (its own run of the step, every allocation "
        f"recorded), drawn {how}; each span as high as the most that was live in it, the "
        "peak's linked to its line"
    )


def _ancestors(event: TraceEvent):
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def _root_of(event: TraceEvent, root_ids: dict[int, int]) -> tuple[TraceEvent | None, int]:
    depth = 0
    for ancestor in _ancestors(event):
        depth += 1
        if id(ancestor) in root_ids:
            return ancestor, depth
    return None, 0


def _leaves(root: TraceEvent) -> list[TraceEvent]:
    """The ops under a dispatch that do its work: an op whose own (self) time is at least half
    its duration counts itself; one that mostly waits on the ops it calls hands down to them."""
    children = [c for c in root.cpu_children if ev.is_aten(c)]
    own = root.dur - sum(c.dur for c in children)
    if not children or own >= root.dur / 2:
        return [root]
    return [leaf for child in children for leaf in _leaves(child)]


def _shapes(event: TraceEvent) -> list | None:
    dims = event.args.get("Input Dims")
    return dims if isinstance(dims, list) else None


def _recorded_shapes(roots: list[TraceEvent], result: dict) -> list:
    """Each dispatch's input shapes as the run recorded them (``dispatch_shapes``: the headline's
    trace has none), when they line up with this step's dispatches; else None for each."""
    recorded = result.get("dispatch_shapes")
    if isinstance(recorded, list) and len(recorded) == len(roots):
        return [s if isinstance(s, list) else None for s in recorded]
    return [None] * len(roots)


def _sites(roots: list[TraceEvent], result: dict) -> tuple[list, str | None]:
    """Each dispatch's source line: from the run's dispatch_sites when they line up, else by op
    name from the per-line table (approximate), else the function's own line (compiled code)."""
    fn = result.get("function") or {}
    recorded = result.get("dispatch_sites")
    if isinstance(recorded, list) and len(recorded) == len(roots):
        return [_site(s) for s in recorded], None
    lines = result.get("lines") or []
    if not lines:
        where = (fn.get("path"), fn.get("line")) if fn.get("path") and fn.get("line") else None
        why = (
            "xla: lines are IR nodes in the XLA section, not times; dispatches count on the "
            "function"
            if result.get("backend") == "xla"
            else "compiled code is not line-attributed: dispatches count on the function"
        )
        return [where] * len(roots), why if where and roots else None
    remaining: dict[str, list[list]] = defaultdict(list)
    for entry in sorted(lines, key=lambda e: (e.get("path", ""), e.get("line", 0))):
        for name, calls in (entry.get("ops") or {}).items():
            remaining[name].append([(entry.get("path"), entry.get("line")), calls])
    found = []
    for root in roots:
        site = None
        for candidate in remaining.get(root.name, []):
            if candidate[1] > 0:
                candidate[1] -= 1
                site = candidate[0]
                break
        found.append(site)
    return found, "source lines matched to dispatches by op name (this run has no dispatch sites)"


def _site(value) -> tuple[str, int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        path, line = value
        if isinstance(path, str) and isinstance(line, int):
            return path, line
    return None


def _python_from_sites(roots, sites, result: dict, rel) -> list[Bar]:
    fn = result.get("function") or {}
    qualname = fn.get("qualname") or "function"
    first, last = roots[0], max(roots, key=lambda r: r.end)
    function_site = (fn["path"], fn["line"]) if fn.get("path") and fn.get("line") else None
    bars = [
        Bar("python", 0, rel(first.ts), last.end - first.ts, qualname, "frame",
            site=function_site, note="the profiled function (its dispatches' span)")
    ]  # fmt: skip
    # A run is a stretch of dispatches from the same line in the same direction: the autograd
    # engine's dispatches count on the line whose forward made their node (schema 4), so a
    # backward run says so rather than pass for that line running again.
    run_start, run_end, run_key = None, None, None
    keyed = [
        (root, (site, node_of(root) is not None)) for root, site in zip(roots, sites, strict=True)
    ]
    for root, key in [*keyed, (None, None)]:
        if root is not None and key == run_key and run_start is not None:
            run_end = max(run_end, root.end)
            continue
        if run_start is not None and run_key is not None and run_key[0] is not None:
            run_site, backward = run_key
            name = f"backward · line {run_site[1]}" if backward else f"line {run_site[1]}"
            note = (
                "the autograd engine's work, on the line whose forward ops made its nodes (what "
                "no forward op made, such as AccumulateGrad: on the line that called backward())"
                if backward
                else None
            )
            bars.append(
                Bar("python", 1, rel(run_start), run_end - run_start, name, "line",
                    site=run_site, note=note)
            )  # fmt: skip
        if root is not None:
            run_start, run_end, run_key = root.ts, root.end, key
    return bars
