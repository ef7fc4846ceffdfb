"""Collectives under the profiler: each call labelled with its name and the user's line.

The profiler alone does not say where a collective came from nor how long the caller waited in
it: gloo's work runs on its own thread (``gloo:all_reduce``) and ``c10d::allreduce_`` covers only
the launch, so a blocking call's wait is nowhere. Wrapping the public ``torch.distributed``
functions in a ``record_function`` labelled ``trnlens.collective:NAME@PATH:LINE`` gives both: the
label's event spans the whole blocking call on the caller's thread, and the label names the
innermost project line that called it. Installed before the user's module is imported, so
``from torch.distributed import all_reduce`` picks up the wrapper too. An ``async_op=True`` call
is labelled ``...#async``: its event covers the launch only (the wait is in ``work.wait()``).
Inside a ``torch.compile``d graph the wrapper steps aside (it would break the graph); there the
graph's functional collectives (``_c10d_functional::all_reduce_`` then ``wait_tensor``) are read
instead: the call's time is its launch plus its wait, and its line is unknown (in the graph).
"""

from __future__ import annotations

import functools
import sys
import time
from types import FrameType

LABEL = "trnlens.collective:"
# What a compiled graph calls instead (functional collectives): a launch, then a wait_tensor.
FUNCTIONAL = "_c10d_functional::"
NAMES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "send",
)

# The collective the process was in when one raised (a timeout, a peer gone): (name, path, line,
# seconds spent in it). The rank worker reads it to name the collective in its error.
last_failure: tuple | None = None
originals: dict = {}


def install(torch, is_project_file, relpath) -> None:
    """Wraps ``torch.distributed``'s collectives once per process (idempotent)."""
    dist = torch.distributed
    for name in NAMES:
        fn = getattr(dist, name, None)
        if fn is None or name in originals:
            continue
        originals[name] = fn
        setattr(dist, name, _wrap(torch, name, fn, is_project_file, relpath))


def _wrap(torch, name, fn, is_project_file, relpath):
    record_function = torch.profiler.record_function
    compiler = getattr(torch, "compiler", None)
    is_compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

    @functools.wraps(fn)
    def collective(*args, **kwargs):
        global last_failure
        if is_compiling():
            # Under dynamo the wrapper must vanish: its frame walk and clock would break the
            # graph where the user's code does not (measured: 3 breaks added to a compiled
            # step). The collective is then part of the compiled graph, not labelled.
            return fn(*args, **kwargs)
        path, line = _caller(is_project_file, relpath)
        label = f"{LABEL}{name}@{path}:{line}" if path else f"{LABEL}{name}"
        if kwargs.get("async_op"):
            label += "#async"
        started = time.perf_counter()
        try:
            with record_function(label):
                return fn(*args, **kwargs)
        except BaseException:
            last_failure = (name, path, line, time.perf_counter() - started)
            raise

    return collective


def _caller(is_project_file, relpath) -> tuple[str | None, int | None]:
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if is_project_file(filename):
            return relpath(filename), frame.f_lineno
        frame = frame.f_back
    return None, None


def parse_label(name: str) -> dict | None:
    """``trnlens.collective:all_reduce@a.py:12#async`` -> name, path, line, async."""
    if not name.startswith(LABEL):
        return None
    text = name[len(LABEL) :]
    is_async = text.endswith("#async")
    if is_async:
        text = text[: -len("#async")]
    collective, _, where = text.partition("@")
    path, _, line = where.rpartition(":")
    return {
        "name": collective,
        "path": path or None,
        "line": int(line) if line.isdigit() else None,
        "async": is_async,
    }


def timeline(events, trace_start_ns: int | None) -> dict:
    """One rank's profiled steps and collective calls, in µs from the profiler's start, with
    the start's wall-clock time (``trace_start_unix_us``) to put ranks on one axis."""
    steps = sorted(
        (e for e in events if e.name.startswith("ProfilerStep")), key=lambda e: e.time_range.start
    )
    spans = [[e.time_range.start, e.time_range.end] for e in steps]
    calls = []
    launched: list[dict] = []  # compiled graphs' collectives waiting for their wait_tensor
    for event in sorted(events, key=lambda e: e.time_range.start):
        start, end = event.time_range.start, event.time_range.end
        parsed = parse_label(event.name)
        if parsed is None and event.name.startswith(FUNCTIONAL):
            op = event.name[len(FUNCTIONAL) :]
            if op.startswith("wait"):
                # The compiled graph blocks here for its oldest launched collective: launch
                # plus wait is that call's time (compute between them is not counted).
                if launched:
                    launched.pop(0)["dur_us"] += end - start
                continue
            parsed = {"name": op.rstrip("_"), "path": None, "line": None, "async": False,
                      "compiled": True}  # fmt: skip
        if parsed is None:
            continue
        index = next((i for i, (a, b) in enumerate(spans) if a <= start <= b), None)
        if index is None:
            continue
        calls.append({**parsed, "step": index, "start_us": start, "dur_us": end - start})
        if parsed.get("compiled"):
            launched.append(calls[-1])
    return {
        "trace_start_unix_us": trace_start_ns / 1000 if trace_start_ns else None,
        "steps": spans,
        "collectives": calls,
    }
