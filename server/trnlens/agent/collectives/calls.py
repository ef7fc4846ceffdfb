"""One rank's collective calls, read from the profiler's own events.

Every collective the process group runs leaves, whoever issued it (Python, DDP's reducer in C++,
FSDP2's hooks, a compiled graph):
- a launch on the caller's thread: the ``c10d::*`` op (``c10d::allreduce_``,
  ``c10d::_allgather_base_``, ...), or a compiled graph's ``_c10d_functional::*`` one;
- its work: gloo runs it on its own threads (``gloo:all_reduce``, spanning the transfer,
  waiting for the peers included); nccl as kernels on the device (``ncclDevKernel_*``).
Each backend runs the work of one process group in launch order, so the n-th launch owns the
first work event not yet taken that starts after it.

A call's line and module come from the labels enclosing its launch: ``wrapper.py``'s (a Python
call's line, or the ``backward()`` line for what was launched during backward), FSDP2's
``FSDP::all_gather (layers.0)``; DDP's n-th all-reduce in a backward is bucket n (owners.py).

A call's time: a blocking Python call's label spans it whole (wait included); any other call's
time is its work's span (an async call's launch returns at once); a compiled graph's call is its
launch plus the ``wait_tensor`` that blocks for it. The exposed part of a call is what no compute
overlaps (HTA's way): on a device its other kernels, on the CPU the caller's own ops; a blocking
call is all exposed, DDP's bucket partly hidden behind the rest of backward.

Seen on an H200 (torch 2.11, nccl, one rank): the launch ``c10d::allreduce_`` holds a
``record_param_comms`` event (collective name, element counts, dtype, process group in the
chrome trace's arguments, which ``prof.events()`` does not expose), then a host-side
``nccl:all_reduce`` span of the enqueue; DDP's launches ran on autograd's device thread, not the
thread that called ``backward()``. One rank runs no nccl kernel (nothing to exchange), so the
kernel matching itself is untested there.
"""

from __future__ import annotations

from .. import overlap
from .wrapper import ISSUER, parse_issuer, parse_label

LAUNCH = "c10d::"
FUNCTIONAL = "_c10d_functional::"
WORK = ("gloo:",)  # the backend's own work events (on its threads)
FSDP = "FSDP::"
# c10d op -> the torch.distributed function users know it by
C10D_NAMES = {
    "allreduce_": "all_reduce",
    "allreduce_coalesced_": "all_reduce_coalesced",
    "allgather_": "all_gather",
    "_allgather_base_": "all_gather_into_tensor",
    "allgather_coalesced_": "all_gather_coalesced",
    "allgather_into_tensor_coalesced_": "all_gather_into_tensor_coalesced",
    "reduce_scatter_": "reduce_scatter",
    "_reduce_scatter_base_": "reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter_tensor_coalesced",
    "broadcast_": "broadcast",
    "reduce_": "reduce",
    "gather_": "gather",
    "scatter_": "scatter",
    "alltoall_": "all_to_all",
    "alltoall_base_": "all_to_all_single",
    "barrier": "barrier",
    "send": "send",
    "recv_": "recv",
    "recv_any_source_": "recv",
}


def is_launch(name: str) -> bool:
    return name.startswith(LAUNCH) or (
        name.startswith(FUNCTIONAL) and not name[len(FUNCTIONAL) :].startswith("wait")
    )


def timeline(events, trace_start_ns: int | None, is_host, ddp=None, fsdp=None) -> dict:
    """This rank's profiled steps and collective calls, in µs from the profiler's start, with
    the start's wall-clock time (``trace_start_unix_us``) to put ranks on one axis.
    ``ddp``: owners.ddp_buckets; ``fsdp``: owners.fsdp_names."""
    ordered = sorted(events, key=lambda e: e.time_range.start)
    # is_host once per event: reading a profiler event's device type is most of the cost
    flags = [is_host(e) for e in ordered]
    host = [e for e, h in zip(ordered, flags, strict=True) if h]
    steps = [e for e in host if e.name.startswith("ProfilerStep")]
    spans = [[e.time_range.start, e.time_range.end] for e in steps]
    main_threads = {e.thread for e in steps}
    device = [e for e, h in zip(ordered, flags, strict=True)
              if not h and overlap.is_comm_kernel(e.name)]  # fmt: skip
    works = _Works(sorted([e for e in host if e.name.startswith(WORK)] + device,
                          key=lambda e: e.time_range.start))  # fmt: skip
    # On CUDA, backward runs on autograd's device thread: the backward() label (on the caller's
    # thread) is then no ancestor of what the reducer launched, only around it in time.
    issuers = [e for e in host if e.name.startswith(ISSUER)]
    calls: list[dict] = []
    launched: list[dict] = []  # compiled graphs' calls waiting for their wait_tensor
    reducer: dict = {}  # id(backward issuer event) -> DDP all-reduces launched in it so far
    for event in host:
        name = event.name
        if name.startswith(FUNCTIONAL) and name[len(FUNCTIONAL) :].startswith("wait"):
            # The compiled graph blocks here for its oldest launched collective: launch plus
            # wait is that call's time (compute between them is not counted).
            if launched:
                launched.pop(0)["dur_us"] += event.time_range.elapsed_us()
            continue
        if not is_launch(name) or any(is_launch(a.name) for a in _ancestors(event)):
            continue
        work = works.take(event.time_range.start)
        start, end = event.time_range.start, event.time_range.end
        index = next((i for i, (a, b) in enumerate(spans) if a <= start <= b), None)
        if index is None:
            continue  # outside the profiled steps (trnlens's own agreement between them)
        call = _describe(event)
        label = call.pop("label_event", None)
        issuer = call.pop("issuer_event", None)
        if issuer is None and label is None:
            issuer = next((i for i in issuers if i.time_range.start <= start <= i.time_range.end),
                          None)  # fmt: skip
            found = parse_issuer(issuer.name) if issuer is not None else None
            if found is not None:
                call.update(path=found["path"], line=found["line"], issuer=found["issuer"])
        if call.get("compiled"):
            # launch ... wait_tensor: the compute between them is not the collective's
            call.update(start_us=start, dur_us=end - start)
            launched.append(call)
        elif label is not None and not call["async"]:
            call.update(start_us=label.time_range.start, dur_us=label.time_range.elapsed_us())
        elif work is not None:
            # gloo ends the work's event after it completes the future the caller waits on: on
            # a busy machine its thread can be descheduled in between (seen: 10 ms past the end
            # of the step whose backward had waited for it). The step bounds it.
            end_us = min(work[1], spans[index][1])
            call.update(start_us=work[0], dur_us=max(end_us - work[0], 0.0))
        else:
            call.update(start_us=start, dur_us=end - start)
        if issuer is not None and label is None and call["name"] == "all_reduce" and ddp:
            n = reducer.get(id(issuer), 0)
            reducer[id(issuer)] = n + 1
            bucket = _bucket(ddp, n)
            if bucket is not None:
                call.update(source="ddp", bucket=bucket["index"], modules=bucket["modules"],
                            bytes=call.get("bytes") or bucket["bytes"])  # fmt: skip
        if call.get("fsdp_module") is not None:
            fqn = call.pop("fsdp_module")
            call["source"] = "fsdp"
            call["modules"] = [(fsdp or {}).get(fqn) or fqn or "<root>"]
        call["step"] = index
        call["thread"] = event.thread
        calls.append(call)
    # The compute a call can hide behind: on a device, its other kernels (HTA's way); on the
    # CPU, the caller's own ops.
    kernels = [e for e, h in zip(ordered, flags, strict=True) if not h]
    if kernels:
        compute = overlap.merge([(e.time_range.start, e.time_range.end) for e in kernels
                                 if not overlap.is_comm_kernel(e.name)])  # fmt: skip
    else:
        compute = _compute(host, main_threads)
    for call in calls:
        call["exposed"] = _exposed(call, compute)
        call.pop("thread", None)
    return {
        "trace_start_unix_us": trace_start_ns / 1000 if trace_start_ns else None,
        "steps": spans,
        "collectives": calls,
    }


def _ancestors(event):
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


class _Works:
    """The backend's work events in start order, each taken by one launch: the first one not yet
    taken that starts at or after the launch (launches come in order: the scan stays short)."""

    def __init__(self, works: list):
        self.works = works
        self.taken = [False] * len(works)
        self.first = 0  # every work before it is taken

    def take(self, start: float) -> tuple[float, float] | None:
        while self.first < len(self.works) and self.taken[self.first]:
            self.first += 1
        for i in range(self.first, len(self.works)):
            if not self.taken[i] and self.works[i].time_range.start >= start:
                self.taken[i] = True
                return self.works[i].time_range.start, self.works[i].time_range.end
        return None


def _describe(launch) -> dict:
    """Name, line, size and owner of a launch, from the labels around it."""
    op = launch.name
    if op.startswith(FUNCTIONAL):
        name = op[len(FUNCTIONAL) :].rstrip("_")
        return {"name": name, "path": None, "line": None, "async": False, "compiled": True,
                "bytes": None, "source": "compiled"}  # fmt: skip
    raw = op[len(LAUNCH) :]
    call: dict = {"name": C10D_NAMES.get(raw, raw.strip("_")), "path": None, "line": None,
                  "async": True, "bytes": None, "source": "c10d"}  # fmt: skip
    for parent in _ancestors(launch):
        parsed = parse_label(parent.name)
        if parsed is not None and "label_event" not in call:
            call.update(parsed, label_event=parent, source="python")
            continue
        issuer = parse_issuer(parent.name)
        if issuer is not None and "issuer_event" not in call:
            call["issuer_event"] = parent
            if call["path"] is None:  # a Python call inside backward keeps its own line
                call.update(path=issuer["path"], line=issuer["line"])
                call["issuer"] = issuer["issuer"]
            continue
        if parent.name.startswith(FSDP) and "fsdp_module" not in call:
            module = _fsdp_module(parent.name)
            if module is not None:
                call["fsdp_module"] = module
    return call


def _fsdp_module(label: str) -> str | None:
    """``FSDP::all_gather (layers.0) [pg=2]`` -> ``layers.0``; a prefetch names its target
    (``FSDP::backward_prefetch for layers.0``); a root's label has no name (-> ``""``)."""
    text = label[len(FSDP) :]
    if " for " in text:
        return text.split(" for ", 1)[1].split(" [", 1)[0].strip()
    if "(" in text:
        return text.split("(", 1)[1].split(")", 1)[0].strip()
    if text.startswith(("all_gather", "post_backward", "pre_forward", "pre_backward")):
        return ""
    return None


def _bucket(ddp: list[dict], n: int) -> dict | None:
    """Bucket ``n`` when there is one DDP model (several: their launches cannot be told apart
    by order alone, so no module is named)."""
    if len(ddp) != 1:
        return None
    buckets = ddp[0]["buckets"]
    return buckets[n] if n < len(buckets) else None


def _compute(host, main_threads: set) -> list[tuple[float, float]]:
    """The caller threads' own work: their outermost ops, collectives' launches left out."""
    covered: dict[int, bool] = {}  # id(event) -> inside an op or a launch (memoised walk up)

    def inside(event) -> bool:
        parent = event.cpu_parent
        if parent is None:
            return False
        key = id(parent)
        if key not in covered:
            name = parent.name
            covered[key] = name.startswith(_COMPUTE) or is_launch(name) or inside(parent)
        return covered[key]

    spans = []
    for event in host:
        if event.thread in main_threads and event.name.startswith(_COMPUTE) and not inside(event):
            spans.append((event.time_range.start, event.time_range.end))
    return overlap.merge(spans)


_COMPUTE = ("aten::", "autograd::engine")


def _exposed(call: dict, compute: list[tuple[float, float]]) -> list[list[float]]:
    """The parts of the call no compute on the caller's threads overlapped."""
    start, end = call["start_us"], call["start_us"] + call["dur_us"]
    out = []
    cursor = start
    for a, b in compute:
        if b <= cursor or a >= end:
            continue
        if a > cursor:
            out.append([cursor, a])
        cursor = max(cursor, b)
    if cursor < end:
        out.append([cursor, end])
    return out
