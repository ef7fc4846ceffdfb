"""The agent process: reads requests from stdin, answers on a private copy of stdout.

User code may print: fd 1 is pointed at stderr before anything else runs, and the protocol goes
to a duplicate of the original stdout, so nothing the user (or a compiler worker) writes can
corrupt it. A reader thread takes ``cancel`` and ``ping`` while a run is busy; cancel interrupts
the main thread (KeyboardInterrupt at the next safe bytecode: interrupts.py) and the server kills
the process if it does not stop in time (a run stuck in C code).

What user code may break is repaired between requests, so one bad run does not spoil the warm
agent's next: the working directory, fd 1 and ``sys.stdout``/``sys.stderr`` are put back. A crash
in C (segfault, abort) prints the Python stack to stderr (faulthandler), which the server reads to
name the user's line. ``TRNLENS_MEMORY_LIMIT_MB`` in the agent's environment (a target's ``env``)
caps its address space (RLIMIT_AS): code that exhausts memory gets a MemoryError on its line
instead of taking the machine down.
"""

from __future__ import annotations

import atexit
import faulthandler
import gc
import json
import os
import pathlib
import platform
import queue
import sys
import threading
import traceback
from dataclasses import replace
from typing import IO

from . import errors
from .artifacts import archive
from .interrupts import Interrupter, stop_would_break
from .libraryfiles import contents
from .libraryfiles.digests import Digests
from .measure import Cancelled
from .protocol import (
    AGENT_VERSION,
    SCHEMA_VERSION,
    ArtifactArchive,
    Cancel,
    Channel,
    ErrorMessage,
    FileContents,
    Files,
    Hello,
    Ping,
    Pong,
    Profile,
    Progress,
    ProtocolError,
    Request,
    ResultMessage,
    Shutdown,
    parse_request,
)
from .ranks import launch as ranks
from .reloader import RestartNeeded
from .runner import Runner

IDLE_GC_S = 1.0  # how long without a request before the last runs' garbage is collected


class Agent:
    def __init__(self, channel: Channel, stop_on_eof: bool = False):
        self.channel = channel
        self.stop_on_eof = stop_on_eof
        self.exit_after = False  # set when a request asked for a fresh process
        self.requests: queue.Queue[Profile | Shutdown | None] = queue.Queue()
        self.current: str | None = None
        self.cancel_requested = threading.Event()
        self.interrupter = Interrupter()
        self.digests = Digests()  # of the library files runs executed (remote targets ask)
        self._lock = threading.Lock()

    # -- reader thread
    def read(self, stream: IO[str]) -> None:
        for line in stream:
            if not line.strip():
                continue
            message: Request
            try:
                message = parse_request(line)
            except ProtocolError as exc:
                error = errors.usage(f"malformed message: {exc}").to_json()
                self.channel.send(ErrorMessage(id=None, error=error))
                continue
            if isinstance(message, Cancel):
                self.cancel(message.id)
            elif isinstance(message, Ping):
                self.channel.send(Pong(id=message.id, pid=os.getpid(), busy=self.current))
            elif isinstance(message, Files):  # file reads only: answered here, run or not
                files = contents.answer(self.digests, message.sha256)
                self.channel.send(FileContents(id=message.id, files=files))
            else:
                self.requests.put(message)
        # End of input. Locally it means no more requests: what is queued still runs (one-shot
        # use pipes a request and closes stdin). Over SSH (--stop-on-eof) it means the
        # connection dropped: stop the current run too, so nothing is left on the host.
        if self.stop_on_eof:
            self.cancel(None)
        self.requests.put(None)

    def cancel(self, request_id: str | None) -> None:
        with self._lock:
            if self.current is not None and request_id in (None, self.current):
                self.cancel_requested.set()
                self.interrupter.cancel()

    # -- main thread
    def serve(self) -> int:
        garbage = False  # a run ended and its garbage was not collected yet
        while True:
            try:
                message = self.requests.get(timeout=IDLE_GC_S if garbage else None)
            except queue.Empty:
                # Collect the runs' garbage once idle, so that it neither weighs on the next
                # measurement nor delays anything: a full collection with torch imported takes
                # 50-600 ms (124,000 objects; the most on a loaded machine), which a repeat
                # request sent at once would otherwise wait for (bench/bench_warm.py).
                gc.collect()
                garbage = False
                continue
            except KeyboardInterrupt:  # a cancel that raced the end of its run
                continue
            if message is None or isinstance(message, Shutdown):
                return 0
            if self.exit_after:
                return 0
            self.handle(message)
            garbage = True
            if self.exit_after:
                return 0

    def handle(self, profile: Profile) -> None:
        request_id, request = profile.id, profile.fields
        with self._lock:
            self.current = request_id
            self.cancel_requested.clear()

        def progress(state: Progress) -> None:
            self.channel.send(replace(state, id=request_id))

        reply: ResultMessage | ErrorMessage

        saved = _ProcessState.save()
        try:
            try:
                root = request.get("project_root") or os.getcwd()
                with self.interrupter.running(root):
                    if ranks.nproc_of(request) > 1:  # N ranks under torchrun (agent/ranks/)
                        result = ranks.run(request, progress, self.cancel_requested.is_set)
                    else:
                        result = Runner(request, progress, self.cancel_requested.is_set).run()
                if (request.get("options") or {}).get("library_digests"):
                    self.digests.annotate(result)  # the server asks for the texts it lacks
                reply = ResultMessage(id=request_id, result=result)
            finally:
                with self._lock:
                    self.current = None
                saved.restore()
        except RestartNeeded as exc:
            error = errors.AgentError("restart", str(exc)).to_json()
            self.channel.send(ErrorMessage(id=request_id, error=error))
            self.exit_after = True
            return
        except (Cancelled, KeyboardInterrupt) as exc:
            reply = ErrorMessage(
                id=request_id, error=errors.AgentError("cancelled", "cancelled").to_json()
            )
            if isinstance(exc, KeyboardInterrupt):
                # Where the cancel stopped the code: a timeout names the line it was stuck at.
                where = stopped_at(exc, request.get("project_root") or os.getcwd())
                if where:
                    reply.error["path"], reply.error["line"] = where
            if isinstance(exc, KeyboardInterrupt) and not interrupted_safely(exc, request):
                # The interrupt landed inside an import or a library (torch half-imported, a
                # profiler half-exited): this process cannot be trusted with the next run.
                reply.error["exiting"] = True
                self.exit_after = True
        except errors.AgentError as exc:
            reply = ErrorMessage(id=request_id, error=exc.to_json())
        except Exception as exc:  # a bug in trnlens, not in the user's code
            reply = ErrorMessage(
                id=request_id,
                error=errors.AgentError(
                    "internal",
                    f"trnlens agent error: {type(exc).__name__}: {exc}",
                    traceback=traceback.format_exc(),
                ).to_json(),
            )
        try:
            self.channel.send(reply)
        except KeyboardInterrupt:  # a late cancel must not eat the answer
            self.channel.send(reply)
        run_dir = (request.get("options") or {}).get("artifacts_back")
        if isinstance(reply, ResultMessage) and isinstance(run_dir, str):
            # A remote run's artifacts follow its result on this connection, before the garbage
            # collection below: no round trip, no ssh command, no wait on the collector.
            data, why = archive.answer(run_dir, request.get("artifacts_dir"))
            self.channel.send(ArtifactArchive(id=request_id, data=data, error=why))


def stopped_at(exc: BaseException, root: str) -> tuple[str, int] | None:
    """The innermost project line in the traceback of a cancel's KeyboardInterrupt."""
    from .loader import Project

    project = Project(root=os.path.abspath(root))
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if project.is_project_file(frame.filename) and frame.lineno:
            return project.relpath(frame.filename), frame.lineno
    return None


def interrupted_safely(exc: BaseException, request: dict) -> bool:
    """Whether a cancel's KeyboardInterrupt left the process fit for the next run: not when it
    landed while a library was being imported (``import torch`` stopped half way leaves torch
    half initialised: seen as ``SystemError: ... bad call flags`` in the next run). The
    interrupter holds a cancel back from such places for a while, not for ever (interrupts.py).
    Elsewhere stopping is what a cancel is; a profiler left running is caught before the next
    run (reloader.RestartNeeded)."""
    codes, frame = [], exc.__traceback__
    while frame is not None:
        codes.append(frame.tb_frame.f_code)
        frame = frame.tb_next
    return not stop_would_break(codes, request.get("project_root") or os.getcwd())


class _ProcessState:
    """What a run's code may change in the agent's process and the next run relies on."""

    def __init__(self, cwd: str | None):
        self.cwd = cwd

    @classmethod
    def save(cls) -> _ProcessState:
        try:
            return cls(os.getcwd())
        except OSError:  # the directory was removed under us
            return cls(None)

    def restore(self) -> None:
        if self.cwd is not None:
            try:
                os.chdir(self.cwd)
            except OSError:
                pass
        try:
            os.fstat(1)
        except OSError:  # the code closed fd 1: point it at stderr again, as at start
            try:
                os.dup2(2, 1)
            except OSError:
                pass  # fd 2 is gone too: prints fail in the next run's code, not here
        sys.stdout = sys.stderr = sys.__stderr__


def _limit_memory() -> None:
    limit = os.environ.get("TRNLENS_MEMORY_LIMIT_MB")
    if not limit:
        return
    import resource

    cap = int(float(limit) * 1024 * 1024)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--probe" in args:
        from .probe import probe

        print(json.dumps(probe()))
        return 0
    _limit_memory()
    faulthandler.enable()  # a segfault or abort in user code prints the Python stack to stderr
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stream = os.fdopen(protocol_fd, "w", encoding="utf-8", buffering=1)
    channel = Channel(stream)
    agent = Agent(channel, stop_on_eof="--stop-on-eof" in args)
    agent.interrupter.install()
    channel.send(
        Hello(
            schema_version=SCHEMA_VERSION,
            agent_version=AGENT_VERSION,
            pid=os.getpid(),
            python=platform.python_version(),
            executable=sys.executable,
            neuron_visible_cores=os.environ.get("NEURON_RT_VISIBLE_CORES"),
        )
    )
    reader = threading.Thread(target=agent.read, args=(sys.stdin,), daemon=True)
    reader.start()
    code = agent.serve()
    stream.flush()
    _quick_exit(code)
    return code


def _quick_exit(code: int) -> None:
    """Ends the process without the interpreter's teardown when nothing needs it: once torch
    and its compiler were imported, the teardown (modules freed one by one) took 0.8 s of a
    cold run on the CPU (measured), for nobody. Only when this process has no child left (a
    compile worker, a DataLoader worker: their owners' exit handlers reap them). The exit
    handlers still run (the user's, logging's: 7 ms after torch and a profile, measured), then
    the standard streams are flushed. Threads the user's code left running are not waited for."""
    if _has_children():
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _has_children() -> bool:
    tasks = pathlib.Path(f"/proc/{os.getpid()}/task")
    try:
        return any((task / "children").read_text().strip() for task in tasks.iterdir())
    except OSError:
        return True  # not Linux, or unreadable: take the ordinary exit
