"""Every call of the step on an XLA device, synchronised and counted.

``wrap(step)`` returns the step the passes run: the call, then ``torch_xla.sync()`` and
``wait_device_ops()`` (the step's pending graph compiled or found in the cache, and executed),
with a metrics snapshot before and after: the call's graphs, compilations, transfers, fallbacks
and host reads. Phases as compilelog.py's: the first call, the rest of the warm-up, and the
measured window (every later call).

The cause of a recompilation needs the graphs' IR, which is gone once synced: the IR text of
the step's outputs is read before the sync during warm-up (not timed) and, in the window, only
in the call after one that compiled (the next graph of a step that recompiles every call, or the
graph that a one-off recompilation made, now cached). So a steady window reads no IR at all.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import errors
from . import irtext, pending
from .metrics import Metrics, Snapshot

PHASES = ("first_call", "warmup", "measured")


@dataclass
class Call:
    index: int
    phase: str
    delta: Snapshot
    ir: list[irtext.Node] | None  # the outputs' graph, when it was read before the sync


class Recorder:
    def __init__(self, torch, backend, warmup: int, project, roots=()):
        met = importlib.import_module("torch_xla.debug.metrics")  # untyped, imported lazily
        self.torch = torch
        self.project = project
        self.backend = backend
        self.metrics = Metrics(met)
        self._text = backend.torch_xla._XLAC._get_xla_tensors_text
        self._set_debug = getattr(backend.torch_xla._XLAC, "_set_ir_debug", None)
        self._debug = True
        self.warmup = max(warmup, 1)
        self.calls: list[Call] = []
        self.overhead_s = 0.0  # snapshots and IR reads: trnlens's cost, not the step's
        # the step's inputs: a training step's graph is also its parameters' and optimizer's
        self.roots = list(roots)

    def wrap(self, step: Callable[[], Any]) -> Callable[[], Any]:
        def recorded():
            began = time.perf_counter()
            index = len(self.calls)
            phase = _phase(index, self.warmup)
            before = self.metrics.snapshot()
            read = phase != "measured" or bool(self.calls and self.calls[-1].delta.uncached)
            self.ir_debug(read)
            spent = time.perf_counter() - began
            out = step()
            began = time.perf_counter()
            ir = irtext.parse(self.ir_text(out)) if read else None
            spent += time.perf_counter() - began
            self.sync(out, ir)
            began = time.perf_counter()
            self.calls.append(Call(index, phase, self.metrics.snapshot().minus(before), ir))
            self.overhead_s += spent + time.perf_counter() - began
            return out

        return recorded

    def ir_debug(self, on: bool) -> None:
        """IR nodes carry their Python frame (``XLA_IR_DEBUG``) only in the calls whose IR is
        read: capturing the frames costs every node a stack walk, 20% of a transformers Llama
        fine-tuning step on the CPU device (bench/bench_xla.py), and a steady measured window
        reads no IR. Locations are not part of a graph's hash: no recompilation."""
        if self._set_debug is not None and self.backend.ir_debug and on != self._debug:
            self._set_debug(on)
            self._debug = on

    def finish(self) -> None:
        """IR debug back on for what reads IR after the measured passes (the sites step)."""
        self.ir_debug(True)

    def sync(self, out: Any, ir: list[irtext.Node] | None) -> None:
        """The step's sync; a graph that fails to compile or execute is the user's code failing,
        reported at the project line that made the graph's last node (the traceback of a sync
        has no user frame)."""
        try:
            self.backend.sync()
        except Exception as exc:
            nodes = ir if ir is not None else irtext.parse(self.ir_text(out))
            sources = irtext.Sources(self.project.is_project_file, self.project.relpath)
            site = next((s for s in map(sources.resolve, reversed(nodes)) if s), None)
            failure = errors.from_user_code(exc, self.project.is_project_file, self.project.relpath)
            failure.message += " (while compiling or executing the step's XLA graph at its sync"
            if site is not None:
                failure.path, failure.line = site
                failure.message += f"; the graph's last op was made at {site[0]}:{site[1]}"
            raise failure from None

    def ir_text(self, out: Any) -> str:
        xla = pending.tensors(out, [], self.roots, self.torch)
        return self._text(xla) if xla else ""


def _phase(index: int, warmup: int) -> str:
    if index == 0:
        return "first_call"
    return "warmup" if index < warmup else "measured"
