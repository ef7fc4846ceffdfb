"""The memory pass: a step's memory peak, what is live at it by kind, and what each step keeps.

torch's own memory profiler (``torch.profiler._memory_profiler``, the data behind the public
``profile.export_memory_timeline``) reads a profile recorded with shapes, memory and Python
calls, follows every tensor from its allocation to its free, and sorts it into parameters,
gradients, optimizer state, activations (what autograd keeps for backward), temporaries and
inputs. It is torch's, kept with torch, and right where a hand-written guess would not be (a
tensor becomes a gradient when autograd writes it). This pass records a few steps that way, on
their own (the Python tracer slows the steps: no time is read from them), and reads:

- the peak of the live memory on the run's device over the steps, the step's phase at that
  moment (forward, backward, optimizer: from the op that allocated it) and the project line whose
  call allocated it, and what is live then, kind by kind;
- growth: tensors a step allocated that are still held when the last step ends, in every step
  but the last (the last one's outputs may still be in use): bytes a step, at the project line
  whose call allocated them (where a list appends a tensor, the line that made the tensor).

Each allocation's line is the innermost Python call into torch made from a project file (the
tracer's caller frame: file and line), so ``torch.ones(n)`` inside ``kept.append(...)`` is
placed on that line, and an allocation inside ``loss.backward()`` or ``opt.step()`` on the line
that called it. Not for XLA or Neuron: their memory is the device runtime's, not torch's
allocator (``reason`` says so).
"""

from __future__ import annotations

import os
import re
import statistics
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from . import events as ev

# Growth is read on every step but the last. Two steps: torch's reading of the timeline costs
# about a second a step of a tiny Llama (14k events in 3 steps: 4.5 s under load), and the steps
# before the pass (warm-up, headline, lines) have made what a step makes once.
STEPS = 2
BASIS = "torch.profiler memory timeline"
# torch's categories (torch.profiler._memory_profiler.Category) under the names trnlens shows
KINDS = {
    "PARAMETER": "parameters",
    "GRADIENT": "gradients",
    "OPTIMIZER_STATE": "optimizer_state",
    "ACTIVATION": "activations",
    "TEMPORARY": "temporaries",
    "INPUT": "inputs",
    "AUTOGRAD_DETAIL": "autograd",
}
OTHER = "other"  # a tensor held before the steps that torch could not sort
TEMPORARIES = "temporaries"
NO_MODULE = "(no module)"  # made by the step's own code, outside any module's call
KEPT = "kept"  # made by an earlier step of the pass and still held (growth, when every step does)
# trnlens's own frames, as the tracer names them (the agent's bundle, or its sources)
_AGENT_NAMES = ("trnlens_agent/", "trnlens/agent/")
# Growth under this a step is not said: a kept scalar (a list of detached losses, 4 bytes a step
# would take 250 million steps to fill a gigabyte) or a buffer a collective's background thread
# has not let go of yet (gloo held the last call's 4-byte tensor past the step, now and then,
# on a 2-rank step). A step that keeps a tensor of its work (an activation, a loss with its
# graph) keeps far more.
GROWTH_FLOOR_BYTES = 512
CURVE_BUCKETS = 120  # slices of the step in the memory curve (the report's lane)
DEVICES = {"cpu": "cpu", "cuda": "cuda"}  # backend name -> the torch device type it allocates on
_OPTIMIZERS = ("torch/optim/", "torch/distributed/optim/")  # the tracer's short file names
_STEP_NAME = re.compile(r"ProfilerStep#\d+$")


def unsupported(backend_name: str) -> str | None:
    """Why the pass cannot run on this backend (None: it can)."""
    if backend_name in DEVICES:
        return None
    return (
        f"memory by kind and line is not measured on {backend_name}: its memory is the device "
        "runtime's, not torch's allocator"
    )


@dataclass(frozen=True)
class Sites:
    """The lines pass's project line of each of a step's dispatches (``sites``, None where it
    found none) and those dispatches' digest: an allocation the tracer cannot place (an
    operator such as ``x * y`` makes no Python call) takes its dispatch's line, in a step of
    this pass that ran the same dispatches."""

    digest: str | None
    sites: list | None


def run(measurer: Any, step: Callable[[], Any], project: Any, sites: Sites | None = None) -> dict:
    """Records :data:`STEPS` steps with memory, shapes and Python calls; their reading."""
    torch = measurer.torch
    collected: dict[str, Any] = {}

    def ready(prof: Any) -> None:
        from torch.profiler._memory_profiler import MemoryProfileTimeline

        profile = prof._memory_profile()
        collected["timeline"] = MemoryProfileTimeline(profile)
        collected["tree"] = list(profile._op_tree.dfs())

    with measurer.context(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*won't be using warmup")
        with torch.profiler.profile(
            activities=measurer.backend.activities(),
            # no warm-up step: no time is read from these steps
            schedule=torch.profiler.schedule(wait=0, warmup=0, active=STEPS, repeat=1),
            on_trace_ready=ready,
            profile_memory=True,
            record_shapes=True,
            with_stack=True,
        ) as prof:
            for _ in range(STEPS):
                measurer.check()
                measurer.one_step(step)
                prof.step()
    device = DEVICES[measurer.backend.name]
    names = {id(module): name for name, module in measurer.named_modules}
    return read(collected["timeline"], collected["tree"], device, project, names, sites)


def read(
    timeline: Any,
    tree: list[Any],
    device: str,
    project: Any,
    modules: dict[int, str],
    sites: Sites | None = None,
) -> dict:
    """The pass's figures from torch's memory timeline and the profile's event tree.
    ``modules``: the step's modules' names by ``id`` (the tracer knows a module call by its
    object's address)."""
    from torch._C._profiler import _EventType

    allocations: dict[int, Any] = {}
    steps: list[tuple[int, int]] = []
    backward_starts: list[int] = []  # each autograd engine run's start
    ops: list[Any] = []
    for event in tree:
        kind = event.typed[0]
        if kind == _EventType.Allocation:
            allocations.setdefault(event.start_time_ns, event)
        elif kind == _EventType.TorchOp and _STEP_NAME.match(event.name):
            steps.append((event.start_time_ns, event.end_time_ns))
        elif kind == _EventType.TorchOp:
            ops.append(event)
        elif kind == _EventType.PyCCall and "run_backward" in event.name:
            backward_starts.append(event.start_time_ns)
    steps.sort()
    # the first step's backward: an activation still live then is what autograd kept for it
    first_backward = min((t for t in backward_starts if _step_index(t, steps) == 0), default=None)

    files = _file_names(project)
    # each step's dispatches; a dispatch's line from the lines pass where the step ran its same
    # dispatches: _key(tree event) -> (path, line)
    every_root = _dispatch_roots(tree, ops)
    roots_by_step = [
        [r for r in every_root if start <= r.start_time_ns <= end] for start, end in steps
    ]
    dispatch_lines: dict[tuple[int, int, str], tuple[str, int]] = {}
    if sites is not None and sites.sites and sites.digest:
        for roots in roots_by_step:
            if ev.dispatch_digest(roots) == sites.digest:
                for root, site in zip(roots, sites.sites, strict=False):
                    if site:
                        dispatch_lines[_key(root)] = (site[0], site[1])

    placed: dict[int, tuple[tuple[str, int] | None, str]] = {}

    def where(t: int) -> tuple[tuple[str, int] | None, str]:
        """The allocation's project line and phase; once per allocation (the kinds, the by-line
        figures and the growth each ask again)."""
        if t in placed:
            return placed[t]
        found = allocations.get(t)
        line = _project_line(found, project, _EventType, files)
        if line is None and found is not None:  # no project call above it: its dispatch's
            line = next(
                (dispatch_lines[k] for a in _ancestors(found) if (k := _key(a)) in dispatch_lines),
                None,
            )
        placed[t] = (line, _phase(found, _EventType))
        return placed[t]

    def library_line(t: int) -> tuple[str, int] | None:
        found = allocations.get(t)
        return _library_line(found, _EventType, files) if found is not None else None

    def module_of(t: int) -> str:
        return _module(allocations.get(t), modules, _EventType)

    def torch_kind(key: Any, version: int) -> str | None:
        found = timeline.categories.get(key, version)
        return KINDS.get(found.name) if found is not None else None

    # the first step's activations: key -> (module, bytes, freed at)
    activations: dict[Any, list[Any]] = {}

    def made_kind(key: Any, version: int, t: int) -> str:
        """A tensor the steps made: a gradient, an activation (made in forward, kept for
        backward) as torch sorts it; the rest temporaries (torch's sorting of a step's other
        tensors is a guess: AdamW's temporaries came out as parameters and as activations)."""
        kind = torch_kind(key, version)
        if kind == "gradients" or (kind == "activations" and where(t)[1] == "forward"):
            return kind
        return TEMPORARIES

    # live bytes by (kind, index of the step that made them; -1: held before the steps)
    live: dict[tuple[str, int], int] = {}
    held: dict[Any, tuple[str, int]] = {}  # a live tensor's (kind, step index)
    made_in: dict[Any, tuple[str, int]] = {}  # each tensor's (kind, step index) when made
    total = peak = 0
    peak_at: tuple[int, int, dict[tuple[str, int], int]] | None = None  # time, step, live
    levels: list[tuple[int, int]] = []  # (time, live bytes after it): the curve's samples
    created: dict[Any, tuple[int, int]] = {}  # key -> (time, bytes), of the steps' tensors
    entries = sorted(
        (entry for entry in timeline.timeline if entry[2][0].device.type == device),
        key=lambda entry: entry[0],
    )
    peak_entry = -1  # the index of the entry after which the peak was live
    for at, (t, action, (key, version), size) in enumerate(entries):
        name = action.name
        if name in ("PREEXISTING", "CREATE"):
            if name == "PREEXISTING":
                held[key] = (torch_kind(key, version) or OTHER, -1)
            else:
                held[key] = (made_kind(key, version, t), _step_index(t, steps))
                created[key] = (t, size)
                if held[key] == ("activations", 0):
                    activations[key] = [
                        _module(allocations.get(t), modules, _EventType),
                        size,
                        None,
                    ]
            live[held[key]] = live.get(held[key], 0) + size
            made_in[key] = held[key]
            total += size
        elif name == "INCREMENT_VERSION" and key in held:
            kind, index = held[key]
            if index < 0:  # torch's kind of the new version (a parameter updated in place)
                live[(kind, index)] -= size
                held[key] = (torch_kind(key, version + 1) or kind, index)
                live[held[key]] = live.get(held[key], 0) + size
        elif name == "DESTROY" and key in held:
            if key in activations:
                activations[key][2] = t
            live[held[key]] -= size
            total -= size
            created.pop(key, None)
            del held[key]
        levels.append((t, total))
        if total > peak and (index := _step_index(t, steps)) >= 0:
            peak, peak_at, peak_entry = total, (t, index, dict(live)), at
    made: dict[str, Any] = {
        "device": device,
        "steps": len(steps),
        "basis": BASIS,
        "peak_bytes": peak,
        "peak_phase": None,
        "peak_line": None,
        "at_peak": {},
        "growth_per_step_bytes": 0,
        "growth": [],
        "activations_by_module": _kept_for_backward(activations.values(), first_backward),
    }
    if peak_at is not None:
        t, index, at_peak = peak_at
        line, phase = where(t)
        made["peak_phase"] = phase
        made["peak_line"] = _line(line)
        made["at_peak"] = _kinds(at_peak, index)
        # sorted as ``at_peak`` sorts them: what an earlier step made and still holds is kept
        kinds = {key: KEPT if 0 <= step < index else kind for key, (kind, step) in made_in.items()}
        made.update(_made_by(entries[: peak_entry + 1], kinds, where, library_line, module_of))
    made["growth_per_step_bytes"], made["growth"] = _growth(created, steps, where)
    if steps:
        index = peak_at[1] if peak_at is not None else 0
        start, end = steps[index]
        span = max(end - start, 1)
        slices = [start + span * (i + 1) / CURVE_BUCKETS for i in range(CURVE_BUCKETS)]
        roots = roots_by_step[index]
        made["curve"] = {
            "step": index,
            "bytes": _highest(levels, start, slices, end),
            # the same curve at the step's dispatches, for the report to draw on the timed
            # step's own dispatches when they are the same ones (the digest says so)
            "dispatch_bytes": _highest(
                levels, start, [r.start_time_ns for r in roots[1:]] + [end], end
            ),
            "dispatch_digest": ev.dispatch_digest(roots),
        }
    return made


MADE_BY_SHOWN = 8  # rows of each "made by" list at the peak


def _made_by(
    entries: list[Any],
    kinds: dict[Any, str],
    where: Callable[[int], tuple[tuple[str, int] | None, str]],
    library_line: Callable[[int], tuple[str, int] | None],
    module_of: Callable[[int], str],
) -> dict[str, list[dict]]:
    """What the steps made that is live at the peak (``entries``: the timeline up to it), by
    kind at the project line, the library line and the module whose call allocated it, the
    largest first. What was held before the steps (parameters, optimizer state, inputs) has no
    allocation in the pass: it is in ``at_peak`` alone."""
    made_at: dict[Any, tuple[int, int]] = {}  # live key -> (time made, bytes)
    for t, action, (key, _version), size in entries:
        if action.name == "CREATE":
            made_at[key] = (t, size)
        elif action.name == "DESTROY":
            made_at.pop(key, None)
    lines: dict[tuple[str, int, str], int] = {}
    libraries: dict[tuple[str, int, str], int] = {}
    by_module: dict[tuple[str, str], int] = {}
    for key, (t, size) in made_at.items():
        kind = kinds.get(key, OTHER)
        line = where(t)[0]
        if line is not None:
            at = (line[0], line[1], kind)  # (no `(*line, kind)`: the agent runs on Python 3.10)
            lines[at] = lines.get(at, 0) + size
        library = library_line(t)
        if library is not None:
            at = (library[0], library[1], kind)
            libraries[at] = libraries.get(at, 0) + size
        module = (module_of(t), kind)
        by_module[module] = by_module.get(module, 0) + size

    def largest(found: dict, fields: tuple[str, ...]) -> list[dict]:
        ranked = sorted(found.items(), key=lambda item: -item[1])[:MADE_BY_SHOWN]
        return [{**dict(zip(fields, k, strict=True)), "bytes": size} for k, size in ranked]

    return {
        "at_peak_by_line": largest(lines, ("path", "line", "kind")),
        "at_peak_by_library_line": largest(libraries, ("path", "line", "kind")),
        "at_peak_by_module": largest(by_module, ("module", "kind")),
    }


def _library_line(
    event: Any, types: Any, files: Callable[[str], str | None]
) -> tuple[str, int] | None:
    """The innermost Python line above the allocation when it is a library's (torch's
    ``adam.py:544``, transformers'); None when that line is the project's or trnlens's own."""
    for ancestor in _ancestors(event):
        if ancestor.typed[0] not in (types.PyCall, types.PyCCall):
            continue
        caller = ancestor.typed[1].caller
        name = caller.file_name
        if files(name) is not None or name.startswith(_AGENT_NAMES):
            return None
        return name, caller.line_number
    return None


def _highest(levels: list[tuple[int, int]], start: int, ends: list[float], end: int) -> list[int]:
    """The most bytes live in each span from ``start`` to each of ``ends`` in turn: the memory
    curve. Spans keep it small whatever the step allocates, and the highest level keeps the
    peak (a mean would hide it)."""
    at = 0
    level = 0
    while at < len(levels) and levels[at][0] < start:  # live when the step starts
        level = levels[at][1]
        at += 1
    highest = []
    for upto in ends:
        high = level
        while at < len(levels) and levels[at][0] <= min(upto, end):
            level = levels[at][1]
            high = max(high, level)
            at += 1
        highest.append(high)
    return highest


def _key(event: Any) -> tuple[int, int, str]:
    """A tree event's identity across reads (torch's bindings may wrap a node anew)."""
    return (event.start_time_ns, event.end_time_ns, event.name)


def _dispatch_roots(tree: list[Any], ops: list[Any]) -> list[Any]:
    """``events.dispatch_roots`` on the profiler's tree (``tree`` in depth-first order, each
    parent before its children; ``ops`` its torch ops), in one pass: an aten op with no aten op
    or compiled region above it, each compiled graph, a region that ran no graph of its own.
    Walking each op's ancestors instead was half the pass's reading on a tiny Llama."""
    below: set[int] = set()  # ids of the events with an aten op or a region above them
    for node in tree:
        parent = node.parent
        if parent is not None and (
            id(parent) in below or ev.is_aten(parent) or ev.is_region(parent)
        ):
            below.add(id(node))
    roots = [
        op
        for op in ops
        if ev.is_graph(op)
        or (ev.is_aten(op) and id(op) not in below)
        or (ev.is_region(op) and not any(ev.is_graph(c) for c in _below(op)))
    ]
    return sorted(roots, key=lambda op: op.start_time_ns)


def _below(event: Any) -> Iterable[Any]:
    """The events under ``event``, not those of a region nested in it (its graphs are its own)."""
    stack = list(event.children)
    while stack:
        child = stack.pop()
        yield child
        if not ev.is_region(child):
            stack.extend(child.children)


def _growth(
    held: dict[Any, tuple[int, int]],
    steps: list[tuple[int, int]],
    where: Callable[[int], tuple[tuple[str, int] | None, str]],
) -> tuple[int, list[dict]]:
    """Bytes a step that the steps before the last allocate and still hold at the end, and the
    lines that allocated them: growth only when every such step holds some."""
    if len(steps) < 2:
        return 0, []
    kept_steps = steps[:-1]
    per_step = [0] * len(kept_steps)
    by_line: dict[tuple[str, int] | None, int] = {}
    for t, size in held.values():
        index = _step_index(t, kept_steps)
        if index < 0:
            continue
        per_step[index] += size
        line, _ = where(t)
        by_line[line] = by_line.get(line, 0) + size
    if min(per_step) <= 0 or statistics.median(per_step) < GROWTH_FLOOR_BYTES:
        return 0, []
    count = len(kept_steps)
    rows = [
        {**(_line(line) or {"path": None, "line": None}), "bytes_per_step": size // count}
        for line, size in sorted(by_line.items(), key=lambda item: -item[1])
    ]
    return int(statistics.median(per_step)), rows


def _kept_for_backward(made: Iterable[list[Any]], backward: int | None) -> list[dict]:
    """The first step's activations still live when its backward starts (torch's kind is a
    tensor's role; one freed in forward was not kept), by module, the largest first."""
    if backward is None:
        return []
    by_module: dict[str, int] = {}
    for module, size, freed in made:
        if freed is None or freed >= backward:
            by_module[module] = by_module.get(module, 0) + size
    return [
        {"module": module, "bytes": size}
        for module, size in sorted(by_module.items(), key=lambda item: -item[1])
    ]


def _step_index(t: int, steps: list[tuple[int, int]]) -> int:
    """The index of the step that ``t`` falls in; -1: none."""
    return next((i for i, (a, b) in enumerate(steps) if a <= t <= b), -1)


def _kinds(live: dict[tuple[str, int], int], step: int) -> dict[str, int]:
    """Live bytes by kind in step ``step``: what an earlier step made and still holds is
    ``kept``."""
    found: dict[str, int] = {}
    for (kind, index), size in live.items():
        name = KEPT if 0 <= index < step else kind
        found[name] = found.get(name, 0) + size
    return {kind: size for kind, size in found.items() if size > 0}


def _line(line: tuple[str, int] | None) -> dict | None:
    return {"path": line[0], "line": line[1]} if line else None


def _ancestors(event: Any) -> Iterable[Any]:
    while event is not None:
        yield event
        event = event.parent


def _project_line(
    event: Any, project: Any, types: Any, files: Callable[[str], str | None]
) -> tuple[str, int] | None:
    """The project line whose call, innermost, led to the allocation."""
    for ancestor in _ancestors(event):
        if ancestor.typed[0] not in (types.PyCall, types.PyCCall):
            continue
        caller = ancestor.typed[1].caller
        path = files(caller.file_name)
        if path is not None:
            return project.relpath(path), caller.line_number
    return None


def _file_names(project: Any) -> Callable[[str], str | None]:
    """The tracer's file name back to the project file's path (None: not the project's). torch
    shortens each name by the first of its prefixes (sys.path and site's, in
    ``torch.profiler.python_tracer._prefix_regex``'s order) that matches it: the path is a prefix
    and the name such that the prefix is the first to match, a file on disk first (an unsaved
    buffer is not on disk)."""
    from torch.profiler.python_tracer import _prefix_regex

    prefixes = _prefix_regex()
    found: dict[str, str | None] = {}

    def first_prefix(path: str) -> str | None:
        return next((p for p in prefixes if path.startswith(p)), None)

    def project_path(name: str) -> str | None:
        if os.path.isabs(name):
            return name if project.is_project_file(name) else None
        paths = [p + name for p in prefixes if first_prefix(p + name) == p]
        on_disk = [path for path in paths if os.path.isfile(path)]
        if on_disk:  # the file the tracer saw, the project's or not
            return on_disk[0] if project.is_project_file(on_disk[0]) else None
        return next((path for path in paths if path in project.files), None)  # unsaved

    def absolute(name: str) -> str | None:
        if name not in found:
            found[name] = project_path(name)
        return found[name]

    return absolute


def _module(event: Any, modules: dict[int, str], types: Any) -> str:
    """The innermost module whose call made the allocation: its name in the step's model (the
    class's, for a module the inputs do not reach), or ``(no module)``."""
    for ancestor in _ancestors(event):
        if ancestor.typed[0] != types.PyCall:
            continue
        module = ancestor.typed[1].module
        if module is not None:
            return modules.get(module.self_ptr) or module.cls_name
    return NO_MODULE


def _phase(event: Any, types: Any) -> str:
    """forward, backward or optimizer: what the step was doing when it allocated. The autograd
    engine's ops and its Python entry; torch's optimizers by their files (the tracer's names;
    its ``optimizer`` field and the ``Optimizer.step#`` label are not above their ops)."""
    for ancestor in _ancestors(event):
        name = ancestor.name
        if name.startswith("autograd::engine::evaluate_function") or "run_backward" in name:
            return "backward"
        if ancestor.typed[0] == types.PyCall and name.startswith(_OPTIMIZERS):
            return "optimizer"
    return "forward"
