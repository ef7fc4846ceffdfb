"""A cancel as an interrupt of the main thread, held back while it would break the process.

A cancel raises KeyboardInterrupt in the main thread (``_thread.interrupt_main``), so that it
stops user code wherever it is, between any two bytecodes. Raised inside the import of a library
it leaves that module half initialised, and the agent must then be replaced (a cold start of
several seconds). That happened in CI: torch imports ``torch.profiler._cupti_monitor`` lazily when
a profiler starts, and a cancel sent as the measuring began landed in it.

So the interrupt goes through a SIGINT handler that looks where the main thread is. In the middle
of an import (``stop_would_break``) it holds the interrupt back, and the cancelling thread
repeats it every RETRY_S until it lands somewhere safe; after FORCE_AFTER_S it is delivered
wherever the thread is (an import that hangs must still stop), and the agent then says it exits
(main.interrupted_safely). FORCE_AFTER_S stays under the server's grace for a cancel's answer
(jobs.CANCEL_GRACE_S, 1 s), after which the server kills the agent anyway.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from types import CodeType, FrameType

RETRY_S = 0.02
FORCE_AFTER_S = 0.5


def stop_would_break(codes: Iterable[CodeType], root: str) -> bool:
    """Whether stopping code that runs in ``codes`` (outermost first) would leave a module half
    imported: some module's top-level code is running that is not the project's own (a
    library's import: site-packages, or anything outside the project), or the innermost frame
    is the import machinery itself (finding or loading a module). A project's own module
    stopped half way is reloaded from its text on the next run (reloader.py), and user code,
    the agent or a library's functions stopped half way is what a cancel is for."""
    root = os.path.abspath(root)
    innermost = None
    for code in codes:
        innermost = code
        if code.co_name == "<module>":
            path = os.path.abspath(code.co_filename)
            installed = any(part in path for part in ("site-packages", "dist-packages"))
            if installed or not path.startswith(root + os.sep):
                return True
    return innermost is not None and innermost.co_filename.startswith("<frozen importlib")


class Interrupter:
    """Delivers a cancel to the main thread at the first safe place. ``install`` (main thread)
    puts the SIGINT handler in place; ``running`` brackets a run (main thread); ``cancel`` asks
    for the interrupt (any thread). Without ``install`` (the handler is Python's default) a
    cancel interrupts at once, as it did before."""

    def __init__(self) -> None:
        self.installed = False
        self.held_back = 0  # interrupts held back so far (tests and the log read it)
        self._boundary: FrameType | None = None  # the frame that started the run
        self._root = ""
        self._generation = 0
        self._requested = False
        self._forced = False
        self._delivered = threading.Event()

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._on_sigint)
        self.installed = True

    def running(self, root: str) -> Interrupter:
        self._root = root
        return self

    def __enter__(self) -> Interrupter:
        self._generation += 1
        self._requested = self._forced = False
        self._delivered.clear()
        self._boundary = sys._getframe(1)
        return self

    def __exit__(self, *exc_info) -> None:
        self._boundary = None

    def cancel(self) -> None:
        """Interrupts the run in progress; with the handler installed, keeps trying in a
        thread of its own until the interrupt has landed or the run has ended."""
        self._requested = True
        _thread.interrupt_main()
        if self.installed:
            generation = self._generation
            threading.Thread(target=self._repeat, args=(generation,), daemon=True).start()

    def _repeat(self, generation: int) -> None:
        deadline = time.monotonic() + FORCE_AFTER_S
        while not self._delivered.wait(RETRY_S):
            if generation != self._generation or self._boundary is None:
                return  # that run ended on its own
            if time.monotonic() >= deadline:
                self._forced = True
            _thread.interrupt_main()

    def _on_sigint(self, signum, frame: FrameType | None) -> None:
        if not self._requested:
            raise KeyboardInterrupt  # a real Ctrl-C: what Python's own handler does
        if self._boundary is None or self._delivered.is_set():
            return  # a repeat that came after the interrupt landed, or after the run ended
        if not self._forced and stop_would_break(self._codes(frame), self._root):
            self.held_back += 1
            return
        self._delivered.set()
        raise KeyboardInterrupt

    def _codes(self, frame: FrameType | None) -> list[CodeType]:
        """The code objects running below the run's start, outermost first."""
        codes = []
        while frame is not None and frame is not self._boundary:
            codes.append(frame.f_code)
            frame = frame.f_back
        return codes[::-1]
