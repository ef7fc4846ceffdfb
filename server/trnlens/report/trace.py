"""Reading one measured step out of a chrome trace, streamed, in bounded memory.

torch's ``export_chrome_trace`` writes one JSON object whose ``traceEvents`` array can reach
hundreds of MB for long or busy steps. ``json.load`` would hold all of it (several times its size
in Python objects) and stall whoever called it; ijson (a well-kept streaming parser with a C
backend, yajl2_c) hands over one event at a time instead. Two passes over the file:

1. the step spans (``ProfilerStep#N``) and the process/thread names, nothing else kept;
2. the events that start inside the chosen step, at most ``max_events`` of them (the rest are
   counted and the report says it was truncated).

The chosen step is the one of median duration: one representative step, not an average.
Events get a ``cpu_parent``/``cpu_children`` tree per thread (nesting by time, as the profiler's
own tree is built), so ``trnlens.agent.events`` counts dispatches here exactly as in the agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import ijson

from trnlens.agent.events import STEP_PREFIX

# A drawn event costs about 1 kB of page (bar, label, tooltip, details): 5,000 keep a busy step's
# page near 5 MB, which a webview still scrolls and zooms smoothly.
MAX_EVENTS = 5_000
_EPSILON_US = 0.01  # chrome trace times are rounded to ns; nesting tolerates that


class TraceError(ValueError):
    """The file is not a readable chrome trace."""


class Range(NamedTuple):
    start: float
    end: float


@dataclass(eq=False)
class TraceEvent:
    """One complete ('X') event, shaped like torch's FunctionEvent where events.py looks."""

    name: str
    cat: str
    ts: float
    dur: float
    pid: Any
    tid: Any
    args: dict
    cpu_parent: TraceEvent | None = None
    cpu_children: list[TraceEvent] = field(default_factory=list)

    @property
    def time_range(self) -> Range:
        return Range(self.ts, self.ts + self.dur)

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def depth(self) -> int:
        depth, parent = 0, self.cpu_parent
        while parent is not None:
            depth, parent = depth + 1, parent.cpu_parent
        return depth


@dataclass
class Step:
    name: str
    start: float
    dur: float


@dataclass
class StepTrace:
    """What the report knows of one step: its events, and how the step was chosen."""

    step: Step | None
    steps: list[Step]
    events: list[TraceEvent]
    dropped: int = 0
    total_events: int = 0
    file_bytes: int = 0
    names: dict[str, str] = field(default_factory=dict)  # "pid" / "pid:tid" -> name

    @property
    def truncated(self) -> bool:
        return self.dropped > 0


def _events(path: Path):
    try:
        with open(path, "rb") as handle:
            yield from ijson.items(handle, "traceEvents.item", use_float=True)
    except ijson.JSONError as exc:
        raise TraceError(f"{path.name} is not a readable chrome trace: {exc}") from None


def read_step(path: str | Path, max_events: int = MAX_EVENTS) -> StepTrace:
    """The median-duration step of a chrome trace and the events inside it (bounded)."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TraceError(f"cannot read {path.name}: {exc.strerror}") from None
    steps: list[Step] = []
    names: dict[str, str] = {}
    total = 0
    for event in _events(path):
        if not isinstance(event, dict):
            continue
        total += 1
        ph, name = event.get("ph"), event.get("name")
        if ph == "X" and isinstance(name, str) and name.startswith(STEP_PREFIX):
            ts, dur = _number(event.get("ts")), _number(event.get("dur"))
            if ts is not None and dur is not None:
                steps.append(Step(name, ts, dur))
        elif ph == "M" and name in ("process_name", "thread_name"):
            label = (event.get("args") or {}).get("name")
            key = str(event.get("pid")) + (f":{event.get('tid')}" if name == "thread_name" else "")
            if isinstance(label, str):
                names[key] = label
    steps.sort(key=lambda s: s.start)
    chosen = sorted(steps, key=lambda s: s.dur)[(len(steps) - 1) // 2] if steps else None
    low, high = (
        (chosen.start, chosen.start + chosen.dur) if chosen else (float("-inf"), float("inf"))
    )
    kept: list[TraceEvent] = []
    dropped = 0
    for event in _events(path):
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        name = event.get("name")
        ts, dur = _number(event.get("ts")), _number(event.get("dur"))
        if not isinstance(name, str) or ts is None or dur is None or name.startswith(STEP_PREFIX):
            continue
        if not (low - _EPSILON_US <= ts <= high + _EPSILON_US):
            continue
        if len(kept) >= max_events:
            dropped += 1
            continue
        args = event.get("args")
        kept.append(
            TraceEvent(
                name=name,
                cat=str(event.get("cat") or ""),
                ts=ts,
                dur=max(dur, 0.0),
                pid=event.get("pid"),
                tid=event.get("tid"),
                args=args if isinstance(args, dict) else {},
            )
        )
    _nest(kept)
    return StepTrace(chosen, steps, kept, dropped, total, size, names)


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _nest(events: list[TraceEvent]) -> None:
    """Parent = the innermost event of the same thread that encloses it in time."""
    by_thread: dict[tuple, list[TraceEvent]] = {}
    for event in events:
        by_thread.setdefault((str(event.pid), str(event.tid)), []).append(event)
    for thread in by_thread.values():
        thread.sort(key=lambda e: (e.ts, -e.dur))
        stack: list[TraceEvent] = []
        for event in thread:
            while stack and stack[-1].end + _EPSILON_US < event.end:
                stack.pop()
            if stack:
                event.cpu_parent = stack[-1]
                stack[-1].cpu_children.append(event)
            stack.append(event)
