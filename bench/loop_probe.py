"""Runs ``trnlens`` with a loop-lag probe: ``python bench/loop_probe.py OUT serve``.

A heartbeat on the server's event loop asks to run every ``INTERVAL_S``; how late each beat
runs is the time the loop could not answer anything (a handler or callback holding it, or, on a
loaded machine, the process waiting for a core). Beside the lateness, the loop thread's CPU time
since the previous beat tells the two apart: a late beat with little CPU behind it was the
machine (or a blocking wait), one with much CPU was work on the loop; and the most CPU one
callback took since the previous beat (what the tests' loop guard bars at 50 ms). Every beat is
written to OUT as ``monotonic_time lag_seconds cpu_seconds callback_cpu_seconds`` lines:
CLOCK_MONOTONIC is one clock for the whole machine, so the bench can cut the beats into the
phases it timed in its own process. The CPU count starts when the loop does: the process's
start-up (its imports, 0.4-0.6 s of CPU before any loop exists) is no work on the loop; until
issue 30 the first beat carried it, and "open, first lenses" read 450 ms of loop CPU beside a
6 ms lag.
Blocking calls made on the loop's own thread (a subprocess waited for, ``os.fsync``,
``time.sleep``) are also written, as ``block monotonic_time seconds what`` lines: how long the
loop sat in each, whatever the machine's load (a busy machine makes them longer, never makes
them appear). The probe only measures; trnlens itself is imported from wherever PYTHONPATH says
(the bench's "before" tree or this one).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import subprocess
import sys
import threading
import time
from asyncio import events

INTERVAL_S = 0.005
FLUSH_EVERY = 200  # beats: the server may be killed rather than exit


class Probe:
    def __init__(self, path: str):
        self.handle = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed at exit)
        self.pending: list[str] = []
        self.cpu = 0.0  # the loop thread's CPU time at the previous beat (set as the loop starts)
        self.longest = 0.0  # the most CPU one callback took since the previous beat
        self.thread: int | None = None
        atexit.register(self.flush)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.cpu, self.thread = time.thread_time(), threading.get_ident()
        loop.call_soon(self.beat, loop, time.monotonic())

    def timed(self, run):
        """asyncio's callback runner, timing each callback on the loop's thread."""
        probe = self

        def timed_run(handle) -> None:
            if threading.get_ident() != probe.thread:
                return run(handle)
            start = time.thread_time()
            try:
                return run(handle)
            finally:
                probe.longest = max(probe.longest, time.thread_time() - start)

        return timed_run

    def beat(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        now, cpu = loop.time(), time.thread_time()
        lag = max(now - due, 0.0)
        self.pending.append(f"{now:.6f} {lag:.6f} {cpu - self.cpu:.6f} {self.longest:.6f}\n")
        self.cpu, self.longest = cpu, 0.0
        if len(self.pending) >= FLUSH_EVERY:
            self.flush()
        loop.call_at(now + INTERVAL_S, self.beat, loop, now + INTERVAL_S)

    def flush(self) -> None:
        if self.pending and not self.handle.closed:
            self.handle.writelines(self.pending)
            self.handle.flush()
            self.pending.clear()


def _watch_blocking(probe: Probe) -> None:
    inside: list[str] = []  # communicate() waits too: one call is counted once

    def wrap(name, function, blocks=lambda *a, **k: True):
        def call(*args, **kwargs):
            if inside or events._get_running_loop() is None or not blocks(*args, **kwargs):
                return function(*args, **kwargs)
            started = time.monotonic()
            inside.append(name)
            try:
                return function(*args, **kwargs)
            finally:
                inside.pop()
                what = next((repr(a.args[:4]) for a in args if hasattr(a, "args")), name)
                line = f"block {started:.6f} {time.monotonic() - started:.6f} {name} {what}\n"
                probe.pending.append(line.replace("\n", " ").rstrip() + "\n")

        return call

    popen = subprocess.Popen
    popen.communicate = wrap("communicate", popen.communicate)
    popen.wait = wrap("wait", popen.wait, lambda p, timeout=None: p.returncode is None)
    os.fsync = wrap("fsync", os.fsync)
    time.sleep = wrap("sleep", time.sleep, lambda seconds: seconds > 0)


def install(path: str) -> None:
    probe = Probe(path)
    _watch_blocking(probe)
    events.Handle._run = probe.timed(events.Handle._run)  # type: ignore[method-assign]

    class ProbingPolicy(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            loop = super().new_event_loop()
            probe.start(loop)
            return loop

    asyncio.set_event_loop_policy(ProbingPolicy())


if __name__ == "__main__":
    install(sys.argv[1])
    from trnlens.cli import main

    sys.exit(main(sys.argv[2:]))
