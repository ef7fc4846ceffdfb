"""The user's line of a collective: Python calls labelled in the profile.

The profiler records every collective the process group runs (``calls.py`` reads them), but not
which line of the user's code issued it. Two labels say so, each a ``record_function`` whose
event encloses the collective's launch on the caller's thread:

- ``trnlens.collective:NAME@PATH:LINE`` around each public ``torch.distributed`` collective
  called from Python (``all_reduce``, ``all_gather_into_tensor``, ...): the innermost project
  line that called it, and the message's size (``#bytes=N``). For a blocking call the label's
  event also spans the whole call, wait included (gloo's ``c10d::allreduce_`` covers only the
  launch). ``async_op=True`` adds ``#async``: the call's time is then its work's (calls.py).
- ``trnlens.collective:issuer:backward@PATH:LINE`` around ``torch.autograd.backward``
  (``loss.backward()`` goes through it): collectives launched from C++ during backward (DDP's
  reducer, FSDP2's hooks) get the ``backward()`` line.

Installed before the user's module is imported, so ``from torch.distributed import all_reduce``
picks up the wrapper too. Inside a ``torch.compile``d graph the wrappers step aside (their frame
walk would break the graph): the graph's functional collectives are read instead (calls.py).
"""

from __future__ import annotations

import functools
import sys
import time
from types import FrameType

LABEL = "trnlens.collective:"
ISSUER = LABEL + "issuer:"  # a call that may launch collectives from C++ (backward)
NAMES = (  # those this torch lacks are skipped
    "all_reduce",
    "all_reduce_coalesced",
    "all_gather",
    "all_gather_coalesced",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_gather_single",  # FSDP2's all-gather (torch 2.13)
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_single",  # FSDP2's reduce-scatter (torch 2.13)
    "reduce_scatter_tensor",
    "scatter",
    "send",
    "isend",
    "irecv",
)

# The collective the process was in when one raised (a timeout, a peer gone): (name, path, line,
# seconds spent in it). The rank worker reads it to name the collective in its error.
last_failure: tuple | None = None
originals: dict = {}


def install(torch, is_project_file, relpath) -> None:
    """Wraps ``torch.distributed``'s collectives and ``torch.autograd.backward`` once per process
    (idempotent)."""
    dist = torch.distributed
    for name in NAMES:
        fn = getattr(dist, name, None)
        if fn is None or name in originals:
            continue
        originals[name] = fn
        setattr(dist, name, _wrap(torch, name, fn, is_project_file, relpath))
    if "backward" not in originals:
        originals["backward"] = torch.autograd.backward
        torch.autograd.backward = _wrap_issuer(
            torch, "backward", torch.autograd.backward, is_project_file, relpath
        )


def _is_compiling(torch):
    compiler = getattr(torch, "compiler", None)
    return getattr(compiler, "is_compiling", None) or (lambda: False)


def _is_profiling(torch):
    """Whether a profiler records now: the labels are for it alone (a label costs a DDP step
    of 1 ms about 30 µs of CPU; the timing pass, unprofiled, should not pay it)."""
    return getattr(torch.autograd, "_profiler_enabled", None) or (lambda: True)


def _wrap(torch, name, fn, is_project_file, relpath):
    record_function = torch.profiler.record_function
    is_compiling = _is_compiling(torch)
    is_profiling = _is_profiling(torch)
    tensor_type = torch.Tensor

    @functools.wraps(fn)
    def collective(*args, **kwargs):
        global last_failure
        if is_compiling():
            # Under dynamo the wrapper must vanish: its frame walk and clock would break the
            # graph where the user's code does not (measured: 3 breaks added to a compiled
            # step). The collective is then part of the compiled graph, not labelled.
            return fn(*args, **kwargs)
        path, line = _caller(is_project_file, relpath)
        if not is_profiling():  # nothing records the label: only the failure's site is kept
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            except BaseException:
                last_failure = (name, path, line, time.perf_counter() - started)
                raise
        label = f"{LABEL}{name}@{path}:{line}" if path else f"{LABEL}{name}"
        if kwargs.get("async_op") or name in ("isend", "irecv"):
            label += "#async"
        size = _message_bytes(tensor_type, args, kwargs)
        if size:
            label += f"#bytes={size}"
        started = time.perf_counter()
        try:
            with record_function(label):
                return fn(*args, **kwargs)
        except BaseException:
            last_failure = (name, path, line, time.perf_counter() - started)
            raise

    return collective


def _wrap_issuer(torch, name, fn, is_project_file, relpath):
    record_function = torch.profiler.record_function
    is_compiling = _is_compiling(torch)
    is_profiling = _is_profiling(torch)

    @functools.wraps(fn)
    def issuer(*args, **kwargs):
        if is_compiling() or not is_profiling():
            return fn(*args, **kwargs)
        path, line = _caller(is_project_file, relpath)
        if path is None:  # not called from the user's code: nothing to put on a line
            return fn(*args, **kwargs)
        with record_function(f"{ISSUER}{name}@{path}:{line}"):
            return fn(*args, **kwargs)

    return issuer


def _message_bytes(tensor_type, args, kwargs) -> int | None:
    """The message's size as nccl-tests counts it: the largest tensor (or list of tensors)
    among the arguments: all_reduce's tensor, all_gather's gathered output, reduce_scatter's
    input."""
    best = 0
    for value in (*args, *kwargs.values()):
        if isinstance(value, tensor_type):
            size = value.numel() * value.element_size()
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], tensor_type):
            size = sum(t.numel() * t.element_size() for t in value if isinstance(t, tensor_type))
        else:
            continue
        best = max(best, size)
    return best or None


def _caller(is_project_file, relpath) -> tuple[str | None, int | None]:
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if is_project_file(filename):
            return relpath(filename), frame.f_lineno
        frame = frame.f_back
    return None, None


def parse_label(name: str) -> dict | None:
    """``trnlens.collective:all_reduce@a.py:12#async#bytes=64`` -> name, path, line, async,
    bytes; None for anything else (an issuer label included)."""
    if not name.startswith(LABEL) or name.startswith(ISSUER):
        return None
    text, *flags = name[len(LABEL) :].split("#")
    size = next((int(f[6:]) for f in flags if f.startswith("bytes=") and f[6:].isdigit()), None)
    collective, path, line = _where(text)
    return {"name": collective, "path": path, "line": line, "async": "async" in flags,
            "bytes": size}  # fmt: skip


def parse_issuer(name: str) -> dict | None:
    """``trnlens.collective:issuer:backward@a.py:20`` -> issuer, path, line."""
    if not name.startswith(ISSUER):
        return None
    issuer, path, line = _where(name[len(ISSUER) :])
    return {"issuer": issuer, "path": path, "line": line}


def _where(text: str) -> tuple[str, str | None, int | None]:
    what, _, where = text.partition("@")
    path, _, line = where.rpartition(":")
    return what, path or None, int(line) if line.isdigit() else None
