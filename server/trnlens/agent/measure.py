"""Measuring one callable: warm-up, the profiled steps, line attribution, the timing pass.

Three passes, each for one job (docs/design.md):
1. headline: ``torch.profiler`` with a schedule (warm-up excluded, the active steps' events kept
   by collecting them in ``on_trace_ready``), the device synchronised every step, no extra mode
   and nothing the figures do not need: input shapes are recorded by the lines pass when there
   is one (``record_shapes`` costs every op a shape copy inside the measured steps);
2. lines: the same steps under the line-attribution mode (eager code only), input shapes too
   (linespass.py);
3. timing: no profiler at all, synchronised, median of N with min and max: the profiler's per-op
   cost penalises unfused code, so speed-ups between variants come from here.
The headline's device, CPU and wall times are medians over the same profiled steps; lines and
findings are then put on the basis of the headline the lens shows (basis.py). In a comparison the
timing pass waits: the variants are timed together in interleaved rounds (comparison.py).
Step times are medians over steps with min and max beside them, and ``stability`` judges them
(spread, the profiled/unprofiled ratio, page faults) and says in the warnings when they mislead.
The headline and timing passes start measuring only once the steps have settled: a step that
faults in fresh memory (the allocator handing big tensors' pages back to the OS, and the next
step zeroing new ones) takes several times a settled one, and starting or stopping the profiler
unsettles the allocator for a step or three (measured on the naive RMSNorm at (4, 512, 2048):
20 ms with 8,000 page faults, 4 ms with none; settling.py).
Warm-up runs under exactly the contexts of the measured steps (grad mode, eval/train), or a
recompilation would land inside the measured window.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import basis, breakdown, heap, linespass, memorypass, overlap, patterns, stability
from . import events as ev
from .collectives import calls as collective_calls
from .collectives import owners as collective_owners
from .settling import CALM_STEPS, SettlingSchedule, page_faults, timing_figures

PROGRESS_EVERY_S = 1.0  # a pass's step-by-step progress, at most this often


class Cancelled(Exception):
    pass


MEMORY_ATTEMPTS = 2  # the memory pass's runs before its failure is said (see _memory)


@dataclass
class Settings:
    warmup: int = 3
    steps: int = 5
    repeats: int = 20
    timing_budget_s: float = 3.0
    lines: bool = True
    trace: bool = True
    timing: bool = True
    # Extra steps, at most, that a pass runs until its steps stop faulting (``_settled``).
    settle_steps: int = 8
    # A comparison times its variants together, in interleaved rounds (rounds.py): each
    # variant's own timing pass and stability verdict then wait for ``finish``.
    defer_timing: bool = False
    # "full": the lines pass also keeps each dispatch's innermost frame and nn.Module
    # (attribution.py); "lines": project lines only (the mode before issue 21, for benchmarks).
    attribution: str = "full"
    attribution_limit: int = 50  # frames and modules kept, the rest summed
    # Backward at its forward (agent/backward/): each dispatch of the autograd engine on the
    # line, frame and module of the forward op that made its node; off: on the line that ran
    # it (``loss.backward()``), as before issue 32 (for benchmarks).
    backward: bool = True
    # Multi-rank: read each collective call from the profile (collectives/); off only to
    # measure what the reading costs (bench/bench_collectives.py).
    collectives: bool = True
    # The memory pass (memorypass.py): the peak by kind and line, and growth step over step; off
    # only to measure what it costs (bench/bench_memory.py).
    memory: bool = True


@dataclass
class Measurement:
    dispatches_per_step: float = 0.0
    wall_time_per_step_us: float = 0.0
    cpu_time_per_step_us: float = 0.0
    device_time_per_step_us: float = 0.0
    peak_memory_bytes: int | None = None
    first_call_us: float | None = None
    steps_us: float = 0.0  # all calls of the user's code in every pass, synchronised
    ops: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    kernel_launches_per_step: float | None = None
    lines: list = field(default_factory=list)
    # [path, line] (or None) of each dispatch of one step, in order: where the report's timeline
    # finds each headline dispatch's source line (set only when every step dispatched alike).
    dispatch_sites: list | None = None
    # The input shapes of each of those dispatches (from the lines pass, which records shapes;
    # the headline's trace has none since it does not): the report's event details.
    dispatch_shapes: list | None = None
    timing: dict | None = None
    profiled_timing: dict | None = None  # the profiled steps' wall times: median, min, max
    stability: dict | None = None
    artifacts: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    findings: list = field(default_factory=list)  # patterns.py, over the headline events
    launch: dict | None = None
    time_scale: dict | None = None  # basis.py: lines and findings on the headline's basis
    # The full attribution (breakdown.py); None when it did not run.
    frames: list | None = None
    frames_rest: dict | None = None
    modules: list | None = None
    modules_rest: dict | None = None
    host_syncs: list | None = None
    library_files: list | None = None
    attribution_us: float | None = None  # the attribution pass's wall time, all its steps
    # Multi-rank runs only: this rank's profiled steps and collective calls (collectives/).
    rank_timeline: dict | None = None
    memory: dict | None = None  # memorypass.py: the peak by kind and line, growth a step


class Measurer:
    def __init__(
        self,
        torch,
        backend,
        context_factory,
        settings: Settings,
        progress,
        cancelled,
        named_modules=(),
        compile_log=None,
        lockstep=None,
    ):
        self.torch = torch
        # Multi-rank: agrees every decision that changes how many steps run, and separates the
        # passes by barriers (distributed.Lockstep); None in a single process.
        self.lockstep = lockstep
        self.trace_start_ns: int | None = None
        self.backend = backend
        self.context = context_factory  # returns a fresh context manager (grad mode) per pass
        self.settings = settings
        self.progress = progress
        self.cancelled = cancelled
        self.steps_us = 0.0
        self.torch_found: list = []  # torch's pattern matcher's hits, taken in on_trace_ready
        self.pattern_warnings: list[str] = []
        self.lines_pass: linespass.LinesPass | None = None  # shapes recorded, times inflated
        self.last_faults = 0  # page faults (minor and major) of the last step
        self.calm_steps = 0  # steps in a row, up to the last, without a page fault
        self.profiled_faults: list[int] = []  # each headline step's
        # Given the first call's return value (before any other step can change it): a
        # comparison's outputs come from the same state for every variant (runner.py).
        self.keep_first_output: Callable[[Any], None] | None = None
        self.round_faults: list[int] = []  # page faults of each interleaved round's call
        self.last_report = time.monotonic()  # when _step_progress last reported
        self.device_mean_us = 0.0  # the profiled device time per step, mean over the steps
        # record_function labels of trnlens's own code -> the (path, line) their ops count on
        self.extra_labels: dict[str, tuple[str, int]] = {}
        self.named_modules = list(named_modules)  # (name, module) reachable from the inputs
        self.compile_log = compile_log  # paused during the attribution pass (its recompiles)
        # (step, project) of the memory pass still to run (memorypass.py): after the timing
        self.memory_pass: tuple[Callable[[], Any], Any] | None = None

    def check(self) -> None:
        if self.cancelled():
            raise Cancelled()

    def one_step(self, step: Callable[[], Any], keep: Callable[[Any], None] | None = None) -> float:
        faults = page_faults()
        start = time.perf_counter()
        out = step()
        self.backend.synchronize()
        elapsed = (time.perf_counter() - start) * 1e6
        self.last_faults = page_faults() - faults
        self.calm_steps = self.calm_steps + 1 if self.last_faults == 0 else 0
        if keep is not None:  # after the step's own figures: the copy is not the code's cost
            keep(out)
        self.steps_us += elapsed  # what the user's code cost; the rest is trnlens's overhead
        return elapsed

    def _step_progress(self, phase: str, what: str, step: int, steps: int) -> None:
        """Step ``step`` of ``steps`` of the pass, reported at most every PROGRESS_EVERY_S
        (between steps, outside their timing): a long pass shows it moves."""
        now = time.monotonic()
        if now - self.last_report >= PROGRESS_EVERY_S:
            self.last_report = now
            self.progress(phase, f"{what} {step} of {steps}", step, steps)

    def _settled(self, extra: int, spent_us: float) -> bool:
        """Whether the steps count as settled: the last ``CALM_STEPS`` took no page fault (one
        is not enough: the allocator can fault every other step), or settling has had its
        extra steps (``settle_steps``) or the timing budget (code that allocates fresh memory
        every step never settles; the figures then say so). Under the profiler, steps can
        fault again once it records (its buffers grow between the tensors): the profiled
        median leaves those steps out (``stability.profiled_summary``)."""
        settled = (
            self.calm_steps >= CALM_STEPS
            or extra >= self.settings.settle_steps
            or spent_us > self.settings.timing_budget_s * 1e6
        )
        # Ranks settle together (every one settled, or the shared extra-step bound reached): a
        # rank recording while another still settles would run a different number of steps.
        return self.lockstep.all(settled) if self.lockstep else settled

    def _phase(self, name: str) -> None:
        if self.lockstep is not None:
            self.lockstep.phase(name)

    def run(self, step, *, compiled: bool, out_dir: str, project) -> Measurement:
        m = Measurement()
        s = self.settings
        self._phase("warm-up")
        with self.context():
            if self.backend.name == "neuron":
                # Eager Neuron compiles a NEFF per op on first use: minutes, not a hang.
                self.progress(
                    "compiling", "first call: Neuron compiles NEFFs, this can take minutes"
                )
            else:
                self.progress("compiling" if compiled else "warm-up", "first call")
            # The first warm-up call's output is the run's output (keep_first_output): no call
            # is made only to capture it.
            m.first_call_us = self.one_step(step, self.keep_first_output)
            warmup = max(s.warmup, 1)
            for done in range(1, warmup):
                self.check()
                self._step_progress("warm-up", "warm-up", done + 1, warmup)
                self.one_step(step)
        self.progress("measuring", f"{s.steps} profiled steps", 0, s.steps)
        self._phase("measuring")
        shapes_later = s.lines and not compiled  # the lines pass records them
        record_shapes = not shapes_later and self.backend.profile_shapes
        events, wall = self._profiled(step, out_dir, record_shapes=record_shapes)
        steps = max(len(ev.step_events(events)), 1)
        m.profiled_timing = stability.profiled_summary(wall, self.profiled_faults)
        m.wall_time_per_step_us = m.profiled_timing["median_us"] if m.profiled_timing else 0.0
        host_events = [e for e in events if ev.is_host(e)]
        if self.lockstep is not None:
            reading = time.thread_time()  # CPU time: what it costs, however busy the machine
            m.rank_timeline = collective_calls.timeline(
                events if s.collectives else [e for e in events if ev.is_step(e)],
                self.trace_start_ns, ev.is_host,
                ddp=collective_owners.ddp_buckets(self.torch, self.named_modules)
                if s.collectives else None,
                fsdp=collective_owners.fsdp_names(self.named_modules) if s.collectives else None,
            )  # fmt: skip
            m.rank_timeline["read_us"] = (time.thread_time() - reading) * 1e6
            if self.backend.time_basis == "device":  # nccl's kernels against compute (CUDA)
                kernels = [(e.name, e.time_range.start, e.time_range.end)
                           for e in events if not ev.is_host(e)]  # fmt: skip
                m.rank_timeline["overlap"] = overlap.figures(kernels, steps)
        m.dispatches_per_step = _per_step(len(ev.dispatch_roots(host_events)), steps)
        # The headline's three times are medians over the same steps: the wall median's (which
        # leaves out steps that faulted in memory the profiler displaced, stability.py).
        kept = stability.kept_steps(wall, self.profiled_faults)
        ordered = sorted(ev.step_events(events), key=lambda e: e.time_range.start)
        if len(ordered) != len(wall):
            kept = list(range(len(ordered)))
        if m.profiled_timing is not None:  # which steps the medians are over (in step order)
            m.profiled_timing["kept_steps"] = kept
        step_cpu = [ordered[i].cpu_time_total for i in kept]
        m.cpu_time_per_step_us = statistics.median(step_cpu) if step_cpu else 0.0
        per_step = self._device_time_by_step(host_events, ordered)
        self.device_mean_us = self._device_time(host_events) / steps  # what lines are parts of
        kept_device = [per_step[i] for i in kept if i < len(per_step)]
        m.device_time_per_step_us = (
            statistics.median(kept_device) if kept_device else self.device_mean_us
        )
        m.ops = ev.op_table(
            events, self.backend.self_device_us, self.backend.device_total_us, steps
        )
        if self.backend.time_basis == "device":
            device_events = [e for e in events if not ev.is_host(e)]
            m.kernels = ev.kernel_table(device_events, steps)
            m.kernel_launches_per_step = _per_step(len(device_events), steps)
        if not events:
            m.warnings.append("the profiler recorded no events for the active steps")
        elif self.backend.time_basis == "device" and m.device_time_per_step_us == 0.0:
            m.warnings.append(
                f"device time is empty on {self.backend.name}: the profiler saw no device "
                "activity (missing synchronise, or the activities do not include the device)"
            )
        if s.trace:
            m.artifacts.append({"kind": "chrome_trace", "path": "trace.json"})
        m.artifacts.extend(self.backend.artifacts(out_dir))
        sites: dict = {}
        if s.lines and not compiled:
            self.progress("measuring", "line attribution", 0, min(s.steps, 3))
            self._phase("lines")
            found = self.lines_pass = linespass.run(self, step, project, events)
            self.torch_found, self.pattern_warnings = found.torch_found, found.pattern_warnings
            m.lines, m.dispatch_sites, m.dispatch_shapes = (
                found.lines, found.dispatch_sites, found.dispatch_shapes
            )  # fmt: skip
            sites = _sites_by_root(host_events, m.dispatch_sites)
            m.attribution_us = found.attribution_us
            m.warnings.extend(found.warnings)
            for row in m.ops:
                row["input_shapes"] = row["input_shapes"] or found.shapes.get(row["name"], [])
            if self.backend.time_basis == "cpu":
                m.peak_memory_bytes = found.host_peak
            if found.breakdown is not None:
                self._breakdown(m, found.breakdown)
        elif compiled:
            m.warnings.append(
                "compiled code: per-line figures are not measured inside a compiled region "
                "(a line-attribution mode would make dynamo recompile); the region counts as "
                "one dispatch per graph"
            )
        m.findings, m.launch = self._findings(m, host_events, sites, compiled)
        if m.host_syncs:
            step_us = m.cpu_time_per_step_us
            if self.backend.time_basis != "cpu":
                step_us = m.device_time_per_step_us
            m.findings = sorted(
                m.findings + breakdown.host_sync_findings(m.host_syncs, step_us, self.backend.name),
                key=lambda f: -f["share"],
            )
        if self.backend.time_basis != "cpu":
            m.peak_memory_bytes = self._device_peak(step)
        if s.memory and memorypass.unsupported(self.backend.name) is None:
            # after the timing (finish): its steps and its heap do not touch the timed calls
            self.memory_pass = (step, project)
        if s.defer_timing:
            m.steps_us = self.steps_us
            return m
        if s.timing:
            self.progress("timing", f"up to {s.repeats} synchronised calls", 0, s.repeats)
            self._phase("timing")
            m.timing = self._timing(step)
        return self.finish(m, m.timing)

    def finish(self, m: Measurement, timing: dict | None) -> Measurement:
        """The timing figures (this variant's own pass, or its share of the interleaved rounds)
        and the stability verdict that reads them."""
        m.timing = timing
        threads = self.torch.get_num_threads() if self.backend.time_basis == "cpu" else None
        m.stability, notes = stability.assess(
            m.profiled_timing, m.timing, busy=_busy(), threads=threads
        )
        m.warnings.extend(notes)
        if self.memory_pass is not None:
            self._memory(m, *self.memory_pass)
            self.memory_pass = None
        m.steps_us = self.steps_us
        self._on_headline_basis(m)
        return m

    def _on_headline_basis(self, m: Measurement) -> None:
        """Lines and findings as shares of the headline the lens shows (basis.py)."""
        name, total = basis.headline(m.device_time_per_step_us, m.timing)
        lines_total = sum(line.get("device_us") or 0.0 for line in m.lines)
        m.time_scale = basis.scale(name, total, self.device_mean_us, lines_total)
        keys = ("device_us", "cpu_us") if self.backend.time_basis == "cpu" else ("device_us",)
        basis.rescale_rows(m.lines, keys, m.time_scale["factor"])
        # A line's backward part (agent/backward/) is on the same basis as the line.
        backward = [line["backward"] for line in m.lines if line.get("backward")]
        basis.rescale_rows(backward, keys, m.time_scale["factor"])
        basis.rescale_findings(m.findings, total)
        # Frames and modules (breakdown.py) are parts of the same profiled steps as the lines.
        parts = ("self_time_per_step_us", "total_time_per_step_us",
                 "backward_self_time_per_step_us", "total_backward_time_per_step_us")  # fmt: skip
        for rows in (m.frames, m.modules, [m.frames_rest, m.modules_rest]):
            basis.rescale_rows([row for row in rows or [] if row], parts, m.time_scale["factor"])

    def round_call(self, step: Callable[[], Any]) -> float:
        """One synchronised call in an interleaved round (rounds.py), under the pass contexts."""
        with self.context():
            elapsed = self.one_step(step)
        self.round_faults.append(self.last_faults)
        return elapsed

    def _findings(self, m: Measurement, host_events, sites, compiled: bool):
        if self.backend.time_basis == "cpu":
            time_us, step_us = (lambda e: e.cpu_time_total), m.cpu_time_per_step_us
        else:
            time_us, step_us = self.backend.device_total_us, m.device_time_per_step_us
        m.warnings.extend(self.pattern_warnings)
        if self.lines_pass is None:  # shapes in the headline (no lines pass): all from there
            return patterns.check(
                host_events, sites, time_us, step_us, self.torch_found, eager=not compiled
            )
        # The headline pass records no shapes (issue 14: they cost every op a copy): the pattern
        # checks read the lines pass (shapes, exact lines; times inflated by its mode, shares
        # against its own steps), the launch check the headline's timing.
        events, line_sites = self.lines_pass.events, self.lines_pass.line_sites
        line_steps = ev.step_events(events)
        lines_step_us = step_us
        if self.backend.time_basis == "cpu" and line_steps:
            lines_step_us = statistics.fmean(e.cpu_time_total for e in line_steps)
        found, _ = patterns.check(
            events, line_sites, time_us, lines_step_us, self.torch_found, eager=False
        )
        launch_found, launch = patterns.check(host_events, sites, time_us, step_us, [],
                                              eager=not compiled, patterns=False)  # fmt: skip
        return sorted(found + launch_found, key=lambda f: -f["share"]), launch

    def _device_time_by_step(self, host_events, ordered_steps) -> list[float]:
        """Each profiled step's device (CPU, on the cpu backend) time, steps in order."""
        if self.backend.time_basis == "cpu":
            work = ev.outermost_work(host_events)
            time_of = lambda e: e.cpu_time_total  # noqa: E731
        else:
            work = [e for e in host_events if not ev.is_step(e)]
            time_of = self.backend.self_device_us
        totals = [0.0] * len(ordered_steps)
        for event in work:
            start = event.time_range.start
            for index, step in enumerate(ordered_steps):
                if step.time_range.start <= start <= step.time_range.end:
                    totals[index] += time_of(event)
                    break
        return totals

    def _device_time(self, host_events) -> float:
        if self.backend.time_basis == "cpu":
            return sum(e.cpu_time_total for e in ev.outermost_work(host_events))
        return sum(self.backend.self_device_us(e) for e in host_events if not ev.is_step(e))

    def _profiled(self, step, out_dir: str, record_shapes: bool):
        torch = self.torch
        collected: dict[str, Any] = {"events": []}
        backend = self.backend
        trace = self.settings.trace

        def ready(prof):
            backend.on_trace_ready(prof)
            collected["events"] = list(prof.events())
            try:  # wall-clock ns of the profiler's time origin: puts ranks on one axis
                self.trace_start_ns = prof.profiler.kineto_results.trace_start_ns()
            except AttributeError:
                self.trace_start_ns = None
            if record_shapes:  # else the lines pass, which records shapes, runs the matcher
                self.torch_found, warnings = patterns.torch_matches(prof, torch, backend.name)
                self.pattern_warnings = warnings
            if trace:
                self.progress("exporting", "chrome trace")
                prof.export_chrome_trace(os.path.join(out_dir, "trace.json"))

        wall: list[float] = []
        faults: list[int] = []
        steps = self.settings.steps
        kwargs = backend.profiler_kwargs(out_dir)
        schedule = SettlingSchedule(torch.profiler.ProfilerAction, steps)
        with self.context():
            with torch.profiler.profile(
                activities=backend.activities(),
                schedule=schedule,
                on_trace_ready=ready,
                record_shapes=record_shapes,
                **kwargs,
            ) as prof:
                extra = 0
                settling_us = 0.0
                self.calm_steps = 0  # counted under the profiler only
                while len(wall) < steps:
                    self.check()
                    elapsed = self.one_step(step)
                    if schedule.recording:
                        wall.append(elapsed)
                        self._step_progress("measuring", "profiled step", len(wall), steps)
                        faults.append(self.last_faults)
                    elif self._settled(extra, settling_us):
                        schedule.record_from(prof.step_num + 1)
                    else:
                        extra += 1
                        settling_us += elapsed
                    prof.step()
        self.profiled_faults = faults
        return collected["events"], wall

    def _breakdown(self, m: Measurement, found: breakdown.Breakdown) -> None:
        limit = self.settings.attribution_limit
        m.frames, m.frames_rest = found.frames(limit)
        m.modules, m.modules_rest = found.modules(limit)
        m.host_syncs = found.host_syncs(self.backend.name)
        m.library_files = found.library_files()

    def _memory(self, m: Measurement, step, project) -> None:
        self.progress("measuring", "memory by kind and line", 0, memorypass.STEPS)
        self._phase("memory")
        lines = self.lines_pass
        sites = memorypass.Sites(lines.dispatch_digest, lines.dispatch_sites) if lines else None
        failure: Exception | None = None
        for attempt in range(MEMORY_ATTEMPTS):
            try:
                m.memory, failure = memorypass.run(self, step, project, sites), None
            except Cancelled:
                raise
            except Exception as e:  # torch's memory profiler is private API: the run goes on
                m.memory, failure = None, e
            # torch's reading of the profile now and then asserts "duplicate outputs" on a
            # loaded machine (seen on one of two gloo ranks in 4 runs): the pass runs once
            # more, on every rank when any failed (its steps hold the step's collectives)
            again = failure is not None
            if self.lockstep is not None:
                again = self.lockstep.any(again)
            if not again or attempt == MEMORY_ATTEMPTS - 1:
                break
        if failure is not None:
            m.warnings.append(
                f"the memory pass failed ({type(failure).__name__}: {failure}): no memory by kind"
            )
        elif m.memory is not None:
            limit = self.backend.memory_limit()
            if limit is not None:
                m.memory["limit_bytes"], m.memory["limit_basis"] = limit

    def _device_peak(self, step) -> int | None:
        self.backend.reset_peak_memory()
        with self.context():
            self.one_step(step)
        return self.backend.peak_memory_bytes()

    def _timing(self, step) -> dict:
        samples: list[float] = []
        faults: list[int] = []
        with self.context(), heap.frozen():  # the agent's own objects are not the step's cost
            # The profiler and the lines pass before this one unsettle the allocator: calls
            # until CALM_STEPS in a row take no page fault (at most settle_steps more) do not
            # count.
            self.calm_steps = 0
            extra, settling_us = 0, self.one_step(step)
            while not self._settled(extra, settling_us):
                self.check()
                extra += 1
                settling_us += self.one_step(step)
            deadline = time.perf_counter() + self.settings.timing_budget_s
            for _ in range(self.settings.repeats):
                self.check()
                samples.append(self.one_step(step))
                faults.append(self.last_faults)
                self._step_progress(
                    "timing", "synchronised call", len(samples), self.settings.repeats
                )
                spent = len(samples) >= 5 and time.perf_counter() > deadline
                if self.lockstep is not None and len(samples) >= 5:
                    spent = self.lockstep.any(spent)  # every rank stops at the same call
                if spent:
                    break
        return timing_figures(samples, faults)


def _busy() -> bool:
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except OSError:
        return False


def _per_step(count: int, steps: int):
    value = count / steps
    return int(value) if value.is_integer() else value


def _sites_by_root(host_events, dispatch_sites) -> dict:
    """id(headline dispatch root) -> (path, line), from the sites of one step's dispatches
    (known only when every step dispatched alike): where each finding came from."""
    if not dispatch_sites:
        return {}
    return {
        id(root): tuple(dispatch_sites[i])
        for roots in ev.roots_by_step(host_events)
        for i, root in enumerate(roots)
        if i < len(dispatch_sites) and dispatch_sites[i]
    }
