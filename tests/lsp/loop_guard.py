"""A blocking-call guard for the language server's event loop (installed by guard.py).

The server answers every request from one asyncio loop, so anything that waits on that thread
stalls every editor feature. Three checks, all independent of how busy the machine is:

- a blocking call made on the loop's own thread (a subprocess waited for, ``os.fsync``,
  ``time.sleep``) is reported where it was made: a ``git log`` on the loop is caught even when it
  happens to be fast, and never confused with a loaded machine;
- a module imported for the first time on the loop's thread (a lazy import inside a handler:
  the disk reads of a cold machine are a stall that no CPU count sees);
- a callback that spends more than ``CPU_STALL_S`` of the loop thread's *CPU time* (asyncio
  debug mode's slow-callback log, measured in CPU time rather than wall time so that being
  descheduled on a shared machine does not count).

Each finding is appended to the file named by ``TRNLENS_LOOP_GUARD``; the test session
(session.editor) fails the test when the file is not empty at the end.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import threading
import time
import traceback
from asyncio import events

ENV = "TRNLENS_LOOP_GUARD"
# A CPU-bound callback over this is a stall: what the server meets for any open, edit or request,
# cold or warm, on library files up to 5,000 lines and project files up to 50,000 (issue 30;
# the handlers' ordinary cost is 1-20 ms, docs/lsp.md has the figures).
CPU_STALL_S = float(os.environ.get("TRNLENS_LOOP_GUARD_CPU_S", "0.05"))

_lock = threading.Lock()
_path: str | None = None


def _report(what: str) -> None:
    stack = "".join(traceback.format_stack(limit=12)[:-2])
    text = f"guard: {what}\n{stack}\n"
    sys.stderr.write(text)
    if _path:
        with _lock, open(_path, "a", encoding="utf-8") as handle:
            handle.write(text)


def _on_loop() -> bool:
    """Whether the calling thread is running an asyncio loop right now."""
    return events._get_running_loop() is not None


def _guarded(name: str, function, blocks=lambda *a, **k: True):
    def call(*args, **kwargs):
        if _on_loop() and blocks(*args, **kwargs):
            _report(f"blocking call on the event loop: {name}{_describe(args)}")
        return function(*args, **kwargs)

    call.__wrapped__ = function  # type: ignore[attr-defined]
    return call


def _describe(args: tuple) -> str:
    for arg in args:
        if isinstance(arg, subprocess.Popen):
            return f"({arg.args!r})"
        if isinstance(arg, (list, tuple)):
            return f"({list(arg)!r})"
    return ""


def _popen_waits(self, timeout=None) -> bool:
    # poll()-style waits (timeout 0, or a process already reaped) do not block
    return self.returncode is None and timeout != 0


class _Sampler:
    """Samples the loop thread's stack while a callback runs, so that a stall's report says
    where the time went (the callback's own repr names only the task it resumed)."""

    INTERVAL_S = 0.005

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.running = threading.Event()
        self.samples: collections.Counter[str] = collections.Counter()
        threading.Thread(target=self._sample, name="loop-guard-sampler", daemon=True).start()

    def begin(self) -> None:
        if threading.get_ident() == self.thread:
            self.samples = collections.Counter()
            self.running.set()

    def end(self) -> collections.Counter[str]:
        if threading.get_ident() != self.thread:
            return collections.Counter()
        self.running.clear()
        return self.samples

    def _sample(self) -> None:
        while True:
            self.running.wait()
            time.sleep.__wrapped__(self.INTERVAL_S)  # type: ignore[attr-defined]
            frame = sys._current_frames().get(self.thread)
            if frame is not None and self.running.is_set():
                stack = "".join(traceback.format_stack(frame, limit=14)[-14:])
                self.samples[stack] += 1


class _FirstImports:
    """Reports a module imported for the first time on the loop's thread (a lazy import in a
    handler): on a machine that sat idle its files are read from disk, a wait that no CPU
    count sees (the first seconds after start-up: initialize, the first didOpen). Imports
    made in worker threads, or before the loop runs, are the server's own business."""

    def find_spec(self, name, path=None, target=None):
        if _on_loop():
            _report(f"blocking call on the event loop: a first import of {name}")
        return None


def install(path: str | None) -> None:
    """Patches the blocking calls and asyncio's callback runner of this process."""
    global _path
    _path = path
    sys.meta_path.insert(0, _FirstImports())
    subprocess.Popen.wait = _guarded("Popen.wait", subprocess.Popen.wait, _popen_waits)
    subprocess.Popen.communicate = _guarded("Popen.communicate", subprocess.Popen.communicate)
    os.fsync = _guarded("os.fsync", os.fsync)
    time.sleep = _guarded("time.sleep", time.sleep, lambda seconds: seconds > 0)

    run = events.Handle._run
    sampler = _Sampler()

    def timed_run(self) -> None:
        start = time.thread_time()
        sampler.begin()
        try:
            run(self)
        finally:
            samples = sampler.end()
        spent = time.thread_time() - start
        if spent > CPU_STALL_S:
            where = "".join(f"  {n} samples in:\n{s}" for s, n in samples.most_common(3))
            _report(
                f"a callback held the event loop for {spent * 1000:.0f} ms of CPU: {self!r}\n"
                f"where its time went (the loop thread's stack, sampled):\n{where}"
            )

    events.Handle._run = timed_run  # TimerHandle inherits it
