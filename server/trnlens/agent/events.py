"""Reading the profiler's event tree: dispatches, op tables, per-line figures.

Pure functions over ``FunctionEvent``-like objects (``name``, ``cpu_parent``, ``cpu_children``,
times), so they are tested on real profiler output and on small hand-made trees alike.

A *dispatch* is one unit of work the framework hands to the device: an eager aten op that no other
aten op or compiled graph called, plus one per compiled graph executed. Inductor's graphs show as
``## Call CompiledFxGraph ...``; a graph break nests the resumed region inside the first one, and
each graph counts. A compiled region that ran no inductor graph (another compile backend, such as
neuron's) counts once.
"""

from __future__ import annotations

import ast
import hashlib
from collections import defaultdict

STEP_PREFIX = "ProfilerStep"
LINE_LABEL = "trnlens.line:"
# Around the backward that training mode adds after the call (runner.py): its dispatches count
# on the profiled function's def line, in a row of their own (``label``), not on no row at all.
ADDED_BACKWARD_LABEL = LINE_LABEL + "added-backward"
COLLECTIVE_LABEL = "trnlens.collective:"  # collectives/wrapper.py: bookkeeping, not work
MODULE_LABEL = "trnlens.module:"  # around each nn.Module call in the attribution pass
COMPILED_REGION = "Torch-Compiled Region"
COMPILED_GRAPH = "## Call CompiledFxGraph"


def is_aten(event) -> bool:
    return event.name.startswith("aten::")


def is_region(event) -> bool:
    return event.name.startswith(COMPILED_REGION)


def is_graph(event) -> bool:
    return event.name.startswith(COMPILED_GRAPH)


def is_step(event) -> bool:
    return event.name.startswith(STEP_PREFIX)


def is_host(event) -> bool:
    """A host-side event (an op, a region); not a device-side one (a CUDA kernel, a memcpy)."""
    device_type = getattr(event, "device_type", None)
    return device_type is None or str(device_type).endswith("CPU")


def is_bookkeeping(event) -> bool:
    """Events trnlens or the profiler made, not work: steps and our own line, module and
    collective labels."""
    return is_step(event) or event.name.startswith((LINE_LABEL, MODULE_LABEL, COLLECTIVE_LABEL))


def _ancestors(event):
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def _region_has_own_graph(region) -> bool:
    stack = list(region.cpu_children)
    while stack:
        child = stack.pop()
        if is_graph(child):
            return True
        if not is_region(child):  # a nested region's graphs are its own
            stack.extend(child.cpu_children)
    return False


def dispatch_key(event) -> str:
    """What a dispatch is, for pairing the same step's dispatches across passes: an op's name; a
    compiled graph or region by kind only (a pass that makes dynamo recompile, such as the
    attribution pass, runs the same graph under another hash and compile id)."""
    if is_graph(event):
        return COMPILED_GRAPH
    if is_region(event):
        return COMPILED_REGION
    return event.name


def dispatch_digest(roots) -> str:
    """A short digest of a step's dispatches in order (``dispatch_key`` each): two passes of
    the same step with the same digest ran the same dispatches, so a figure of one pass can be
    drawn at the other's (the memory curve on the timed step, report/timeline.py)."""
    keys = "\n".join(dispatch_key(root) for root in roots)
    return hashlib.sha1(keys.encode("utf-8"), usedforsecurity=False).hexdigest()[:16]


def dispatch_roots(events) -> list:
    """The events that each count as one dispatch, in the order they started."""
    roots = []
    for event in events:
        if is_aten(event):
            if not any(is_aten(a) or is_region(a) for a in _ancestors(event)):
                roots.append(event)
        elif is_graph(event):
            roots.append(event)
        elif is_region(event) and not _region_has_own_graph(event):
            roots.append(event)
    return sorted(roots, key=lambda e: e.time_range.start)


def outermost_work(events) -> list:
    """Top-level units of work (for time sums): dispatch roots not inside a counted region."""
    tops = []
    for event in events:
        if is_bookkeeping(event):
            continue
        if is_aten(event) or is_region(event) or is_graph(event):
            if not any(is_aten(a) or is_region(a) or is_graph(a) for a in _ancestors(event)):
                tops.append(event)
    return tops


def step_events(events) -> list:
    """The profiled steps: the host's ``ProfilerStep#N`` ranges only. On CUDA the profiler also
    records each step as a device-side ``gpu_user_annotation`` of the same name; counting those
    too halved every per-step figure (seen on an H200: 3 dispatches a step for the naive RMSNorm's
    6, device time half the busy time)."""
    return [e for e in events if is_step(e) and is_host(e)]


def op_table(events, self_device_us, device_total_us, steps: int, limit: int = 60) -> list[dict]:
    """key_averages()-style rows (per step), CPU and device columns side by side.

    Host ops only: a host op's device columns already hold the time of the kernels it launched,
    so the kernels themselves (device-side events) would count that time twice in any sum over
    the rows; they have a table of their own (``kernel_table``).
    """
    rows: dict[str, dict] = {}
    for event in events:
        if is_bookkeeping(event) or not is_host(event):
            continue
        row = rows.setdefault(
            event.name,
            {
                "name": event.name,
                "calls": 0,
                "self_cpu_us": 0.0,
                "self_device_us": 0.0,
                "cpu_total_us": 0.0,
                "device_total_us": 0.0,
            },
        )
        row["calls"] += 1
        row["self_cpu_us"] += event.self_cpu_time_total
        row["cpu_total_us"] += event.cpu_time_total
        row["self_device_us"] += self_device_us(event)
        row["device_total_us"] += device_total_us(event)
    shapes = op_shapes(events)
    table = []
    for name, row in rows.items():
        per_step = {k: (v / steps if isinstance(v, float) else v) for k, v in row.items()}
        per_step["calls"] = row["calls"] / steps
        if per_step["calls"].is_integer():
            per_step["calls"] = int(per_step["calls"])
        per_step["input_shapes"] = shapes.get(name, [])
        table.append(per_step)
    table.sort(key=lambda r: (-r["self_device_us"], -r["self_cpu_us"]))
    return table[:limit]


def kernel_table(events, steps: int, limit: int = 30) -> list[dict]:
    """Device-side events (CUDA kernels, memcpy/memset; Neuron device events) per step, by name."""
    rows: dict[str, dict] = {}
    for event in events:
        if is_host(event):
            continue
        row = rows.setdefault(event.name, {"name": event.name, "calls": 0, "device_us": 0.0})
        row["calls"] += 1
        row["device_us"] += event.time_range.elapsed_us()
    table = []
    for row in rows.values():
        calls = row["calls"] / steps
        table.append(
            {
                "name": row["name"],
                "calls": int(calls) if calls.is_integer() else calls,
                "device_us": row["device_us"] / steps,
            }
        )
    table.sort(key=lambda r: -r["device_us"])
    return table[:limit]


def op_shapes(events) -> dict[str, list]:
    """Each op's three most common input shapes (events recorded with ``record_shapes``)."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for event in events:
        shape = getattr(event, "input_shapes", None)
        if shape and not is_bookkeeping(event):
            counts[event.name][str(shape)] += 1
    return {
        name: [_parse_shapes(text) for text, _ in sorted(c.items(), key=lambda kv: -kv[1])[:3]]
        for name, c in counts.items()
    }


def _parse_shapes(text: str):
    # FunctionEvent.input_shapes is a list of lists; we stored its str() to count duplicates.
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def roots_by_step(events) -> list[list]:
    """The dispatch roots of each profiled step, in order (steps ordered by start time)."""
    steps = sorted(step_events(events), key=lambda e: e.time_range.start)
    grouped: list[list] = [[] for _ in steps]
    for root in dispatch_roots(events):
        for index, step in enumerate(steps):
            if step.time_range.start <= root.time_range.start <= step.time_range.end:
                grouped[index].append(root)
                break
    return grouped


def site_of(root, labels: dict[str, tuple[str, int]]) -> tuple[str, int] | None:
    """The innermost ``trnlens.line:`` label above a dispatch root, as (path, line)."""
    for ancestor in _ancestors(root):
        if ancestor.name in labels:
            return labels[ancestor.name]
    return None


def line_table(pairs, device_us, steps: int, backward: set[int] | None = None) -> list[dict]:
    """Per-line self figures from (site, dispatch root) pairs: each root counts on its site.
    ``backward``: ids of the roots the autograd engine ran, counted again apart (``backward``
    in the entry: a part of the line's figures, never added to them)."""
    lines: dict[tuple[str, int], dict] = {}
    for where, root in pairs:
        if where is None:
            continue
        entry = lines.setdefault(
            where,
            {
                "path": where[0],
                "line": where[1],
                "cpu_us": 0.0,
                "device_us": 0.0,
                "dispatches": 0,
                "ops": defaultdict(int),
                "backward": [0, 0.0, 0.0],
            },
        )
        cpu, device = root.cpu_time_total, device_us(root)
        entry["cpu_us"] += cpu
        entry["device_us"] += device
        entry["dispatches"] += 1
        entry["ops"][root.name] += 1
        if backward and id(root) in backward:
            part = entry["backward"]
            part[0] += 1
            part[1] += cpu
            part[2] += device
    result = []
    for entry in lines.values():
        dispatches = entry["dispatches"] / steps
        row = {
            "path": entry["path"],
            "line": entry["line"],
            "cpu_us": entry["cpu_us"] / steps,
            "device_us": entry["device_us"] / steps,
            "dispatches": _whole(dispatches),
            "ops": {name: n / steps for name, n in entry["ops"].items()},
        }
        count, cpu, device = entry["backward"]
        if count:
            row["backward"] = {
                "dispatches": _whole(count / steps),
                "cpu_us": cpu / steps,
                "device_us": device / steps,
            }
        result.append(row)
    result.sort(key=lambda r: (r["path"], r["line"]))
    return result


def _whole(value: float):
    return int(value) if value.is_integer() else value


def peak_memory_from_events(events) -> int | None:
    """Peak extra host memory during the profiled window, from profile_memory allocation events."""
    deltas = []
    for event in events:
        if is_bookkeeping(event):
            continue
        usage = getattr(event, "self_cpu_memory_usage", 0) or 0
        if event.name == "[memory]":
            usage = getattr(event, "cpu_memory_usage", 0) or 0
        if usage:
            deltas.append((event.time_range.start, usage))
    if not deltas:
        return None
    deltas.sort()
    live = peak = 0
    for _, delta in deltas:
        live += delta
        peak = max(peak, live)
    return int(peak)
