"""One step under a dispatch mode: where each op of the step came from, forward and backward,
and which IR nodes it made; CPU fallbacks and forced executions at their lines.

A ``TorchDispatchMode`` sees every aten op the step dispatches, XLA tensors included. Each op is
put on a *place*: its innermost frame (a library line such as transformers'
``modeling_llama.py:65``), its innermost project line and the nn.Module running it (global
module hooks, ``attribution.ModuleTracker``), and whether the autograd engine ran it.

Backward: the engine runs an XLA device's nodes on a thread of its own, where there is no
Python stack at all (``sys._getframe(2)`` there raised "call stack is not deep enough": issue
40). A backward op takes the place of the forward op that made its node instead, as the CPU
backend does (backward/links.py), by autograd's sequence numbers: a forward op reads the
thread's counter (``_get_sequence_nr``) after autograd numbered the node it makes, and the
engine's ``_current_autograd_node()`` says which node a backward op runs in. A node no forward
op of the step made (``AccumulateGrad``) stays at the ``backward()`` call, read from the
waiting thread's frames.

IR nodes: with ``XLA_IR_DEBUG`` torch-xla stamps each node with the innermost Python frame that
made it, and the basename of its file only. Here each op is called from a one-line function
compiled under a file named for its place (``trnlens_site_<k>.py``): every node of the step's
graph, backward ones included, then names the place that made it. The graph read is the one
the step's own sync compiles (the tensors the step left pending: its outputs, everything the
mode saw made and still alive, and the tensors of its inputs), and the graph of every sync the
step makes itself (``torch_xla.sync()``, ``xm.mark_step()``: read just before it runs); a graph
that a host read cut earlier is counted in graphs and ops, not in IR nodes.

Around each op the mode reads two counters: the op's own ``aten::<op>`` counter (an op without
an XLA lowering runs on the CPU under its aten name) and the graph executions (an op that needs
a value on the host cuts the graph and executes it there). All this costs every op a frame walk
and a few counter reads: it runs as one extra step after the measured passes, never inside them.
"""

from __future__ import annotations

import re
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import attribution
from . import irtext, pending
from .metrics import HOST_READ_OP

WHY = {
    HOST_READ_OP: "a host read of a lazy tensor (.item(), float(t), bool(t), if t:, print)",
    "aten::nonzero": "a data-dependent shape (nonzero)",
    "aten::masked_select": "a data-dependent shape (masked_select)",
    "aten::index": "indexing with a boolean mask or a tensor of indices read on the host",
    "aten::_to_copy": "a copy to the host (.cpu(), .tolist(), .numpy(), print(tensor))",
}

# What to do about each, on XLA (a graph cut is a second graph per step; a compile is minutes on
# Neuron).
ADVICE = {
    HOST_READ_OP: "read it less often (every N steps), or in xm.add_step_closure(...), which "
    "runs after the step's graph has executed: no graph cut",
    "aten::_to_copy": "copy it to the host after the step's sync, or in "
    "xm.add_step_closure(...): no graph cut",
    "aten::nonzero": "keep a fixed shape: a mask multiplied in, or torch.where(cond, a, b)",
    "aten::masked_select": "keep a fixed shape: torch.where(mask, x, 0) and a sum",
    "aten::index": "keep a fixed shape: torch.where(mask, x, 0) instead of x[mask]",
}
OTHER_ADVICE = "move the read after the step's sync, or keep the value on the device"

# The places' own functions: one per place index, process-wide (their code is the same; only
# the file name, which torch-xla writes into each IR node's location, tells them apart).
_SITE_CODE = "def site(op, args, kwargs):\n    return op(*args, **kwargs)\n"
_SITE_FILE = re.compile(r"^trnlens_site_(\d+)\.py$")
_site_functions: list[Callable] = []


def site_function(index: int) -> Callable:
    while len(_site_functions) <= index:
        namespace: dict[str, Any] = {}
        filename = f"trnlens_site_{len(_site_functions)}.py"
        exec(compile(_SITE_CODE, filename, "exec"), namespace)  # noqa: S102 - our own line
        _site_functions.append(namespace["site"])
    return _site_functions[index]


def place_of_node(node: irtext.Node) -> int | None:
    """The place index an IR node's location names, or None for a node made elsewhere."""
    if node.file is None:
        return None
    found = _SITE_FILE.match(node.file)
    return int(found.group(1)) if found else None


# (innermost frame, project frame, module key, backward): frames raw (file, line, function)
Place = tuple


@dataclass
class Tally:
    ops: int = 0
    ir_nodes: int = 0
    graphs: set[int] = field(default_factory=set)


@dataclass
class Sites:
    places: list[Place] = field(default_factory=list)  # index -> place
    tallies: list[Tally] = field(default_factory=list)  # index -> its counts
    fallbacks: list[dict] = field(default_factory=list)  # op, count, path, line
    forced: list[dict] = field(default_factory=list)  # op, executions, path, line, why
    graphs: int = 0  # executions in this step, its own sync included
    ir_nodes_elsewhere: int = 0  # nodes of the graph no op of the step made (none expected)
    ir_read: bool = False  # whether the sync's graph was read
    modules: dict = field(default_factory=dict)  # module key -> attribution.ModuleInfo
    module_calls: Counter = field(default_factory=Counter)  # module key -> calls in the step
    skipped: list[str] = field(default_factory=list)  # what this step could not read, and why
    syncs: list[dict] = field(default_factory=list)  # path, line, count: the step's own syncs
    backward_passes: list[dict] = field(default_factory=list)  # path, line of each backward()


class _Places:
    def __init__(self):
        self.index: dict[Place, int] = {}
        self.found = Sites()

    def of(self, place: Place) -> int:
        k = self.index.get(place)
        if k is None:
            k = self.index[place] = len(self.found.places)
            self.found.places.append(place)
            self.found.tallies.append(Tally())
        return k


def attribute(step: Callable[[], Any], recorder, project, context, named_modules=(),
              roots=()) -> Sites:  # fmt: skip
    """Runs ``step`` (unwrapped) once under the dispatch mode, within ``context()``, and returns
    the sites; ``recorder`` (recorder.Recorder) lends its metrics, IR reader and sync.
    ``named_modules`` names the modules; ``roots`` (the step's inputs) hold the tensors whose
    pending updates (parameters, gradients, optimizer state) the sync's graph computes."""
    torch = recorder.torch
    from torch.utils._python_dispatch import TorchDispatchMode

    metrics = recorder.metrics
    kinds = attribution.FrameKinds(project.is_project_file, project.relpath, torch)
    names = {id(m): name for name, m in named_modules}
    tracker = attribution.ModuleTracker(torch, kinds, names, [m for _, m in named_modules],
                                        labels=False)  # fmt: skip
    places = _Places()
    found = places.found
    creators: dict[int, int] = {}  # forward sequence number -> the place of the op that made it
    fallbacks: Counter = Counter()
    forced: dict[tuple, int] = {}
    made: list = []  # weak references to the XLA tensors the ops returned
    main = threading.get_ident()
    peek = getattr(torch._C._autograd, "_get_sequence_nr", None)
    current_node = getattr(torch._C, "_current_autograd_node", None)
    start = {"executions": 0, "after_sync": 0}

    def forward_place(frame) -> int:
        innermost, proj = kinds.walk(frame)
        module = tracker.current() if threading.get_ident() == main else None
        return places.of((innermost, proj, module, False))

    task_id = getattr(torch._C, "_current_graph_task_id", None)
    # backward pass (graph task) -> the place of the backward() call that started it, read once
    # from the frames of the thread waiting in it
    passes: dict[int, int] = {}

    def backward_place(node) -> int:
        task = task_id() if task_id is not None else -1
        if task not in passes:
            frame = sys._current_frames().get(main)
            innermost, proj = kinds.walk(frame) if frame is not None else (None, None)
            passes[task] = places.of((innermost, proj, None, True))
        creator = creators.get(node._sequence_nr())
        if creator is not None:
            innermost, proj, module, _ = found.places[creator]
            return places.of((innermost, proj, module, True))
        # No forward op of this step made the node (AccumulateGrad, the engine's own): the line
        # that called backward()
        return passes[task]

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            if name.startswith("profiler::"):  # record_function's own ops: labels, not work
                return func(*args, **(kwargs or {}))
            node = current_node() if current_node is not None else None
            if node is not None:
                k = backward_place(node)
            else:
                k = forward_place(sys._getframe(0).f_back)  # None-safe on a bare thread
                if peek is not None and threading.get_ident() == main:
                    creators.setdefault(peek() - 1, k)
            before_count = metrics.counter(name)
            before_exec = metrics.executions()
            out = site_function(k)(func._op, args, kwargs or {})
            executed = metrics.executions() - before_exec
            counted = metrics.counter(name) - before_count
            if executed and start["after_sync"] and not counted and name not in WHY:
                executed = 0  # the step's own sync's execution, counted late: not this op's
            start["after_sync"] = 0
            tally = found.tallies[k]
            tally.ops += 1
            tally.graphs.add(before_exec - start["executions"] + 1)
            if counted and name != HOST_READ_OP:
                fallbacks[(name, k)] += counted
            if executed or (name == HOST_READ_OP and _on_xla(args, torch)):  # not a host scalar
                forced[(name, k)] = forced.get((name, k), 0) + max(executed, 1 if counted else 0)
            _keep_weakly(out, made, torch)
            return out

    def count_ir(pending: list) -> None:
        """The IR nodes of the graph ``pending``'s tensors are about to compute, on their
        places."""
        if not pending:
            return
        found.ir_read = True
        for node in irtext.parse(recorder._text(pending)):
            if node.op == "xla::device_data":  # an input (data on the device), not work
                continue
            k = place_of_node(node)
            if k is None or k >= len(found.tallies):
                found.ir_nodes_elsewhere += 1
            else:
                found.tallies[k].ir_nodes += 1

    xlac = recorder.backend.torch_xla._XLAC
    marker = xlac._xla_step_marker
    syncs: Counter = Counter()

    def step_marker(*args, **kwargs):
        """A sync the step makes itself (``torch_xla.sync()``, ``xm.mark_step()``,
        ``xm.optimizer_step(..., barrier=True)``): its graph's IR nodes are read before it runs,
        and it is waited for, so that its execution counts here and not on the next op."""
        if threading.get_ident() == main:
            syncs[kinds.walk(sys._getframe(1))[1]] += 1
            count_ir(pending.tensors(None, made, roots, torch))
        kwargs["wait"] = True
        done = marker(*args, **kwargs)
        recorder.backend.xm.wait_device_ops()  # the execution's metric lands before the next op
        start["after_sync"] = 1
        return done

    with context():
        start["executions"] = before = metrics.executions()
        try:
            xlac._xla_step_marker = step_marker
            with tracker, Mode():
                out = step()  # the step itself, unrecorded: this call is not a measured one
            left = pending.tensors(out, made, roots, torch)
            count_ir(left)
            del left
        finally:
            xlac._xla_step_marker = marker
            recorder.backend.sync()
        del out  # alive through the sync, or its graph would have nothing to compute
        found.graphs = metrics.executions() - before
    found.modules = tracker.info
    for (op, k), count in sorted(fallbacks.items(), key=lambda kv: -kv[1]):
        found.fallbacks.append({"op": op, "count": count, **_at(found.places[k], kinds)})
    for k in passes.values():
        found.backward_passes.append(_at(found.places[k], kinds))
    for proj, count in syncs.items():
        found.syncs.append({**_at((None, proj), kinds), "count": count})
    for (op, k), count in forced.items():
        found.forced.append({"op": op, "executions": count, "why": WHY.get(op, "the op needs a "
                             "value"), "advice": ADVICE.get(op, OTHER_ADVICE),
                             **_at(found.places[k], kinds)})  # fmt: skip
    return found


def _on_xla(args, torch) -> bool:
    """Whether an op read an XLA tensor (an optimizer's step count lives on the host: reading
    it is no read of the device)."""
    return any(isinstance(a, torch.Tensor) and a.device.type == "xla" for a in args)


def _keep_weakly(out: Any, made: list, torch) -> None:
    if isinstance(out, torch.Tensor):
        if out.device.type == "xla":
            made.append(weakref.ref(out))
    elif isinstance(out, (list, tuple)):
        for item in out:
            _keep_weakly(item, made, torch)


def _at(place: Place, kinds) -> dict:
    proj = place[1]
    if proj is None:
        return {"path": None, "line": None}
    return {"path": kinds.display(proj[0]), "line": proj[1]}
