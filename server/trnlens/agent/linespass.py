"""The lines pass: per-line figures from the same steps under the line-attribution mode.

The mode adds a label and a Python frame walk to every torch call, so times measured under it
are inflated: eager code runs the same dispatches every step, and when the attributed step
matches the headline steps op for op, each headline dispatch takes the site of its counterpart
and the lines carry the headline's times. Under ``attribution="full"`` the pass also keeps each
dispatch's innermost frame and nn.Module (attribution.py, breakdown.py). It records input shapes
(the headline does not): the op table and the shape patterns read them from here.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import attribution, breakdown, patterns
from . import events as ev
from .lines import make_line_mode


class StepRunner(Protocol):
    """What the pass needs of measure.Measurer: its steps run through it (counted, cancellable,
    under the pass contexts). A protocol, so that this module does not import measure.py."""

    torch: Any
    backend: Any
    settings: Any  # measure.Settings
    compile_log: Any  # compilelog.CompileLog | None: paused during this pass (its recompiles)
    extra_labels: dict[str, tuple[str, int]]
    named_modules: list[tuple[str, Any]]

    def context(self) -> contextlib.AbstractContextManager[Any]: ...

    def one_step(
        self, step: Callable[[], Any], keep: Callable[[Any], None] | None = None
    ) -> float: ...

    def check(self) -> None: ...


@dataclass
class LinesPass:
    """What the lines pass found."""

    lines: list = field(default_factory=list)  # the line table (events.line_table)
    host_peak: int | None = None  # the first attributed step's host memory peak
    warnings: list[str] = field(default_factory=list)
    # One step's dispatch sites and input shapes, when every step dispatched alike (else None).
    dispatch_sites: list | None = None
    dispatch_digest: str | None = None  # of that step's dispatches (events.dispatch_digest)
    dispatch_shapes: list | None = None
    shapes: dict = field(default_factory=dict)  # op name -> input shapes, for the op table
    events: list = field(default_factory=list)  # the attributed steps' host events
    line_sites: dict = field(default_factory=dict)  # id(dispatch root) -> (path, line)
    breakdown: breakdown.Breakdown | None = None  # attribution="full" only
    attribution_us: float = 0.0  # the pass's wall time, all its steps
    torch_found: list = field(default_factory=list)  # torch's pattern matcher's hits
    pattern_warnings: list[str] = field(default_factory=list)


def run(
    measurer: StepRunner, step: Callable[[], Any], project: Any, headline_events: list
) -> LinesPass:
    """Per-line figures: sites from a pass under the attribution mode, times from the headline.

    The mode adds a label and a Python frame walk to every torch call, so the times measured
    under it are inflated. Eager code runs the same sequence of dispatches every step: when
    the attributed step's sequence matches the headline steps op for op, each headline
    dispatch takes the site of its counterpart and the lines carry the headline's times.
    """
    torch = measurer.torch
    full = measurer.settings.attribution == "full"
    kinds = attribution.FrameKinds(project.is_project_file, project.relpath, torch)
    if full:
        mode = attribution.make_attribution_mode(torch, kinds)
        names = {id(module): name for name, module in measurer.named_modules}
        modules = attribution.ModuleTracker(
            torch, kinds, names, [module for _, module in measurer.named_modules]
        )
        tracker: contextlib.AbstractContextManager[Any] = modules
        compiled_calls: contextlib.AbstractContextManager[Any] = attribution.CompiledCallSites(
            torch, mode
        )
    else:
        mode = make_line_mode(torch, project.is_project_file, project.relpath)
        tracker = compiled_calls = contextlib.nullcontext()
    mode.labels.update(measurer.extra_labels)
    collected: dict[str, Any] = {"events": []}
    steps = min(measurer.settings.steps, 3)
    found = LinesPass()

    def ready(prof):
        collected["events"] = list(prof.events())
        # This pass records shapes (the headline does not): the shape patterns read it.
        found.torch_found, found.pattern_warnings = patterns.torch_matches(
            prof, torch, measurer.backend.name
        )

    began = time.perf_counter()
    if measurer.compile_log is not None:  # dynamo recompiles for the mode: not the user's doing
        measurer.compile_log.pause()
    try:
        with measurer.context(), tracker, compiled_calls, mode, _quiet_hook_warning():
            measurer.one_step(step)  # a step under the mode first: nothing recompiles later
            with torch.profiler.profile(
                activities=measurer.backend.activities(),
                schedule=torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1),
                on_trace_ready=ready,
                profile_memory=measurer.backend.time_basis == "cpu",
                record_shapes=True,  # for the op table: kept out of the headline pass
            ) as prof:
                for _ in range(steps + 1):
                    measurer.check()
                    measurer.one_step(step)
                    prof.step()
    finally:
        if measurer.compile_log is not None:
            measurer.compile_log.resume()
    found.attribution_us = (time.perf_counter() - began) * 1e6
    events = [e for e in collected["events"] if ev.is_host(e)]
    if measurer.backend.time_basis == "cpu":

        def device_us(e):
            return e.cpu_time_total
    else:
        device_us = measurer.backend.device_total_us
    if full:
        found.breakdown = breakdown.Breakdown(
            events, mode.sites, modules.info, kinds, headline_events, device_us,
            backward=measurer.settings.backward,
        )  # fmt: skip
        project_site, extra = found.breakdown.project_site, measurer.extra_labels

        def site_of(root):  # trnlens's own labelled work (the added backward) too
            return project_site(root) or ev.site_of(root, extra)

    else:

        def site_of(root):
            return ev.site_of(root, mode.labels)

    attributed = ev.roots_by_step(events)
    sites = [site_of(root) for root in attributed[0]] if attributed else []
    keys = [ev.dispatch_key(root) for root in attributed[0]] if attributed else []
    headline = ev.roots_by_step([e for e in headline_events if ev.is_host(e)])
    notes: list[str] = []
    dispatch_sites = dispatch_shapes = None
    # The roots the autograd engine ran: a part of their line's figures (the same pairing as
    # breakdown's, so the ids are those of the roots paired below).
    backward = found.breakdown.backward_roots() if full and found.breakdown else None
    if headline and all([ev.dispatch_key(r) for r in roots] == keys for roots in headline):
        pairs = [(sites[i], r) for roots in headline for i, r in enumerate(roots)]
        table = ev.line_table(pairs, device_us, len(headline), backward)
        dispatch_sites = [list(site) if site else None for site in sites]
        found.dispatch_digest = ev.dispatch_digest(attributed[0])
        dispatch_shapes = [getattr(r, "input_shapes", None) or None for r in attributed[0]]
    else:
        pairs = [(site_of(r), r) for roots in attributed for r in roots]
        table = ev.line_table(pairs, device_us, max(len(attributed), 1), backward)
        notes.append(
            "the dispatches differ from step to step: per-line times were measured under "
            "the line-attribution mode and read higher than the headline figures"
        )
    found.events = events
    found.line_sites = {id(r): site_of(r) for roots in attributed for r in roots}
    found.lines, found.warnings = table, notes
    found.dispatch_sites, found.dispatch_shapes = dispatch_sites, dispatch_shapes
    found.shapes = ev.op_shapes(events)
    found.host_peak = ev.peak_memory_from_events(_first_step_events(events))
    return found


@contextlib.contextmanager
def _quiet_hook_warning() -> Iterator[None]:
    """torch warns, at every torch.compile(module) call while global module hooks exist, that the
    hooks fire for its wrapper too; the attribution pass's hooks skip the wrapper, and the user
    did nothing to be warned about."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there")
        yield


def _first_step_events(events) -> list:
    steps = sorted(ev.step_events(events), key=lambda e: e.time_range.start)
    if not steps:
        return events
    first = steps[0].time_range
    return [
        e for e in events if first.start <= e.time_range.start <= first.end and not ev.is_step(e)
    ]
