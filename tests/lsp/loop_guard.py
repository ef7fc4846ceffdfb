"""A blocking-call guard for the language server's event loop (installed by guard.py).

The server answers every request from one asyncio loop, so anything that waits on that thread
stalls every editor feature. Two checks, both independent of how busy the machine is:

- a blocking call made on the loop's own thread (a subprocess waited for, ``os.fsync``,
  ``time.sleep``) is reported where it was made: a ``git log`` on the loop is caught even when it
  happens to be fast, and never confused with a loaded machine;
- a callback that spends more than ``CPU_STALL_S`` of the loop thread's *CPU time* (asyncio
  debug mode's slow-callback log, measured in CPU time rather than wall time so that being
  descheduled on a shared machine does not count).

Each finding is appended to the file named by ``TRNLENS_LOOP_GUARD``; the test session
(session.editor) fails the test when the file is not empty at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import traceback
from asyncio import events

ENV = "TRNLENS_LOOP_GUARD"
# A CPU-bound callback over this is a stall (the goal is none over 20 ms; this is the
# bar at which a test fails, far above the handlers' ordinary 1-10 ms, so noise never trips it).
CPU_STALL_S = float(os.environ.get("TRNLENS_LOOP_GUARD_CPU_S", "0.5"))

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


def install(path: str | None) -> None:
    """Patches the blocking calls and asyncio's callback runner of this process."""
    global _path
    _path = path
    subprocess.Popen.wait = _guarded("Popen.wait", subprocess.Popen.wait, _popen_waits)
    subprocess.Popen.communicate = _guarded("Popen.communicate", subprocess.Popen.communicate)
    os.fsync = _guarded("os.fsync", os.fsync)
    time.sleep = _guarded("time.sleep", time.sleep, lambda seconds: seconds > 0)

    run = events.Handle._run

    def timed_run(self) -> None:
        start = time.thread_time()
        run(self)
        spent = time.thread_time() - start
        if spent > CPU_STALL_S:
            _report(f"a callback held the event loop for {spent * 1000:.0f} ms of CPU: {self!r}")

    events.Handle._run = timed_run  # TimerHandle inherits it
