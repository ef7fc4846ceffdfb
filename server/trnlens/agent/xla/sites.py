"""One step under a dispatch mode: the line of every CPU fallback and forced execution, and the
graph each line's ops ended in.

A ``TorchDispatchMode`` sees every aten op the step dispatches, XLA tensors included, with the
Python stack of the call. Around each op it reads two counters: the op's own ``aten::<op>``
counter (torch-xla counts an op that has no XLA lowering and runs on the CPU under its aten
name) and the number of graph executions (an op that needs a value on the host: ``.item()``,
``nonzero``, boolean indexing, a fallback's inputs, cuts the graph and executes it there). The
op's line is its innermost project frame. Graph k of the step holds the ops traced after k-1
executions. IR nodes per line are those of the step's last graph (the sync's), read in warm-up
without this mode: nodes of a graph that a host read cut earlier are not counted on lines (their
lines still say which graph they ended in).

The mode costs every op two counter reads and a frame walk: this runs one extra step after the
measured passes, never inside them.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from . import irtext
from .metrics import HOST_READ_OP

WHY = {
    HOST_READ_OP: "a host read of a lazy tensor (.item(), float(t), bool(t), if t:, print)",
    "aten::nonzero": "a data-dependent shape (nonzero)",
    "aten::masked_select": "a data-dependent shape (masked_select)",
    "aten::index": "indexing with a boolean mask or a tensor of indices read on the host",
    "aten::_to_copy": "a copy to the host (.cpu(), .tolist(), .numpy())",
}


@dataclass
class Sites:
    fallbacks: list[dict] = field(default_factory=list)  # op, count, path, line
    forced: list[dict] = field(default_factory=list)  # op, executions, path, line, why
    lines: list[dict] = field(default_factory=list)  # path, line, ops, graphs, ir_nodes
    graphs: int = 0  # executions in this step, its own sync included
    ir_nodes_elsewhere: int = 0  # nodes made in library code (not on a project line)


def attribute(step: Callable[[], Any], recorder, project, context) -> Sites:
    """Runs ``step`` (unwrapped) once under the dispatch mode, within ``context()``, and returns
    the sites; ``recorder`` (recorder.Recorder) lends its metrics, IR reader and sync."""
    from torch.utils._python_dispatch import TorchDispatchMode

    metrics = recorder.metrics
    sources = irtext.Sources(project.is_project_file, project.relpath)
    ops_on: Counter = Counter()
    graphs_on: dict[tuple, set[int]] = {}
    fallbacks: Counter = Counter()
    forced: dict[tuple, int] = {}
    state = {"executions": 0}

    def site() -> tuple[str, int] | None:
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            if project.is_project_file(frame.f_code.co_filename):
                return project.relpath(frame.f_code.co_filename), frame.f_lineno
            frame = frame.f_back
        return None

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            where = site()
            before_count = metrics.counter(name)
            before_exec = metrics.executions()
            out = func(*args, **(kwargs or {}))
            executed = metrics.executions() - before_exec
            graph = state["executions"] + 1
            state["executions"] += executed
            if where is not None:
                ops_on[where] += 1
                graphs_on.setdefault(where, set()).add(graph)
            counted = metrics.counter(name) - before_count
            if counted and name != HOST_READ_OP:
                fallbacks[(name, where)] += counted
            if executed or name == HOST_READ_OP:
                key = (name, where)
                forced[key] = forced.get(key, 0) + max(executed, 1 if counted else 0)
            return out

    with context():
        before = metrics.executions()
        with Mode():
            out = step()  # the step itself, unrecorded: this call is not a measured one
        recorder.backend.sync()
        del out  # alive through the sync, or its graph would have nothing to compute
        total = metrics.executions() - before
    found = Sites(graphs=total)
    # IR nodes per line: the last warm-up call's graph, read with no mode in the way (under this
    # mode every node's XLA_IR_DEBUG location would be the mode's own frame).
    last = next((c.ir for c in reversed(recorder.calls) if c.ir is not None), None)
    nodes, found.ir_nodes_elsewhere = irtext.nodes_per_line(last or [], sources)
    for (op, where), count in sorted(fallbacks.items(), key=lambda kv: -kv[1]):
        found.fallbacks.append({"op": op, "count": count, **_at(where)})
    for (op, where), count in forced.items():
        found.forced.append(
            {
                "op": op,
                "executions": count,
                "why": WHY.get(op, "the op needs a value"),
                **_at(where),
            }
        )
    for where in sorted(set(ops_on) | set(nodes), key=lambda w: (w[0], w[1])):
        found.lines.append({
            "path": where[0], "line": where[1], "ops": ops_on.get(where, 0),
            "graphs": sorted(graphs_on.get(where, ())), "ir_nodes": nodes.get(where, 0),
        })  # fmt: skip
    return found


def _at(where: tuple[str, int] | None) -> dict:
    return {"path": where[0], "line": where[1]} if where else {"path": None, "line": None}
