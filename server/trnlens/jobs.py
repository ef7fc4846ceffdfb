"""A profile request on a target: start the agent, stream progress, cancel, store the results.

asyncio over a subprocess, so that cancel really stops work: the agent is told first, and its
process group is killed when it does not answer within the grace period (a run stuck in C code).
The CLI and the language server both go through :func:`run_profile`.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import os
import re
import signal
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trnlens import outcome as outcomes
from trnlens import project
from trnlens.agent.protocol import (
    RUN_DEFAULTS,
    SCHEMA_VERSION,
    AgentMessage,
    ArtifactArchive,
    Cancel,
    ErrorMessage,
    FileContents,
    Files,
    Hello,
    Ping,
    Profile,
    Progress,
    ProtocolError,
    Request,
    ResultMessage,
    Shutdown,
    format_message,
    parse_agent_message,
)
from trnlens.explorer import summary
from trnlens.libraries import texts as library_texts
from trnlens.outcome import ComparisonResult, Outcome
from trnlens.store import Store
from trnlens.targets.base import redact
from trnlens.targets.local import LocalTarget
from trnlens.targets.ssh import SshTarget, TargetError
from trnlens.timeouts import within

Target = LocalTarget | SshTarget

# Called with each of the agent's progress messages: its state (phase, variant of variants, step
# of steps) and message. It may return an awaitable, which the request then awaits.
OnProgress = Callable[[Progress], Any]
HELLO_TIMEOUT_S = 60.0
CANCEL_GRACE_S = 1.0
DEFAULT_IDLE_S = 600.0
NEURON_IDLE_S = 60.0
DEFAULT_MEMORY_CAP_MB = 16_000.0
DEFAULT_STALL_S = 120.0
STDERR_LINE_CHARS = 2000
# faulthandler's frames (most recent call first), printed by the agent when user code crashes
_FAULT_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<func>.+)$')
_ids = itertools.count(1)


class AgentFailure(Exception):
    """The request failed; ``error`` is the agent's error object (``kind`` says whose fault)."""

    def __init__(self, error: dict):
        super().__init__(error.get("message", "agent failure"))
        self.error = error

    @property
    def kind(self) -> str:
        return self.error.get("kind", "internal")


def _clip(text: str) -> str:
    return text if len(text) <= STDERR_LINE_CHARS else text[:STDERR_LINE_CHARS] + " [...]"


def timed_out(timeout_s: float | None, agent: AgentProcess) -> AgentFailure:
    """A run stopped by its timeout: not the environment's fault, and it says where it was: the
    phase from the agent's last progress and the project line the cancel stopped it at."""
    progress = agent.last_progress
    cancelled = agent.cancelled_answer
    answer = cancelled.error if isinstance(cancelled, ErrorMessage) else {}
    phase = progress.phase if progress is not None else "starting"
    detail = f": {progress.message}" if progress is not None and progress.message else ""
    message = (
        f"the run took longer than {timeout_s or 0:g} s and was stopped in phase {phase!r}"
        f"{detail} (variant {progress.variant if progress is not None else 0})"
    )
    if answer.get("path"):
        message += f", at {answer['path']}:{answer['line']}"
    elif phase in ("building-inputs", "compiling", "warm-up", "measuring", "timing"):
        message += ", where no project line was running (inside a library, or between steps)"
    if phase == "compiling":
        message += "; a first compile can take minutes (Neuron): raise --timeout"
    else:
        message += "; is the code stuck (an endless loop, a wait)? else raise --timeout"
    failure = agent_failure("timeout", message)
    failure.error["path"], failure.error["line"] = answer.get("path"), answer.get("line")
    return failure


def agent_failure(kind: str, message: str) -> AgentFailure:
    return AgentFailure(
        {"kind": kind, "type": kind, "message": message, "path": None, "line": None,
         "traceback": None}
    )  # fmt: skip


class AgentProcess:
    """One agent process speaking the line protocol; one request at a time.

    Kept warm between requests (torch stays imported), it shuts itself down after
    ``idle_timeout_s`` without work (60 s once it ran on Neuron, where a live process holds
    NeuronCores the user's own jobs need), asks its agent to restart above ``memory_cap_mb``, and
    treats ``stall_s`` of silence, unanswered pings included, as a hang.
    """

    def __init__(
        self,
        target: Target,
        idle_timeout_s: float | None = DEFAULT_IDLE_S,
        memory_cap_mb: float | None = DEFAULT_MEMORY_CAP_MB,
        stall_s: float = DEFAULT_STALL_S,
    ):
        self.target = target
        self.proc: asyncio.subprocess.Process | None = None
        self.hello: Hello | None = None
        self.last_progress: Progress | None = None  # the phase a timeout names
        self.cancelled_answer: ResultMessage | ErrorMessage | None = None  # where a cancel stopped
        self.idle_timeout_s = idle_timeout_s
        self.memory_cap_mb = memory_cap_mb
        self.stall_s = stall_s
        self.backend: str | None = None  # learnt from the first result
        self.runs = 0
        self.archive: bytes | None = None  # the artifacts pushed after the last result
        self._stderr: deque[str] = deque(maxlen=200)
        self._stderr_task: asyncio.Task | None = None
        self._idle: asyncio.TimerHandle | None = None

    def _arm_idle_timer(self) -> None:
        timeout = self.idle_timeout_s
        if timeout is not None and self.backend == "neuron":
            timeout = min(timeout, NEURON_IDLE_S)
        if timeout is None or not self.alive():
            return
        loop = asyncio.get_running_loop()
        self._idle = loop.call_later(timeout, lambda: loop.create_task(self.close()))

    def _disarm_idle_timer(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    async def start(self) -> None:
        self._reap_group()  # what the last (ended) agent's code left behind
        try:
            await self.target.prepare()
            command = self.target.command()
        except (FileNotFoundError, TargetError) as exc:
            raise agent_failure("environment", str(exc)) from None
        self.proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.target.environment(),
            start_new_session=True,  # its own process group: a terminal's Ctrl-C is ours to relay
            limit=64 * 1024 * 1024,  # one result line can be large (many ops and lines)
        )
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        try:
            hello = await within(self._read(), HELLO_TIMEOUT_S)
        except asyncio.TimeoutError:
            await self.kill()
            raise agent_failure("environment", "the agent did not start in time") from None
        if not isinstance(hello, Hello):
            await self.kill()
            await self._settle_stderr()
            raise agent_failure("environment", f"the agent did not start: {self.stderr_tail()}")
        if hello.schema_version != SCHEMA_VERSION:
            await self.kill()
            raise agent_failure(
                "environment",
                f"agent speaks schema {hello.schema_version}, this trnlens {SCHEMA_VERSION}",
            )
        self.hello = hello

    async def _drain_stderr(self) -> None:
        """Keeps the last lines of the agent's stderr (user prints included), each cut to
        ``STDERR_LINE_CHARS``: reading in chunks, a line of any length neither stops the reader
        (which would block the agent on a full pipe) nor fills our memory."""
        assert self.proc and self.proc.stderr
        pending = b""
        while chunk := await self.proc.stderr.read(1 << 16):
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                self._stderr.append(_clip(raw.decode("utf-8", "replace").rstrip()))
            if len(pending) > STDERR_LINE_CHARS * 4:  # the start of a very long line is enough
                pending = pending[: STDERR_LINE_CHARS * 4]
        if pending:
            self._stderr.append(_clip(pending.decode("utf-8", "replace").rstrip()))

    async def _settle_stderr(self) -> None:
        """Lets the last lines of a process that ended reach the buffer (for error messages)."""
        if self._stderr_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass

    def stderr_tail(self, lines: int = 20) -> str:
        text = "\n".join(list(self._stderr)[-lines:]) or "(no output)"
        return redact(text, self.target.secrets())

    def _process(self) -> asyncio.subprocess.Process:
        assert self.proc is not None, "the agent was not started"
        return self.proc

    async def _read(self) -> AgentMessage | None:
        """The agent's next protocol message; None once its output ended. A line that is not
        one (a library writing to the protocol's fd) goes to the stderr buffer, for errors."""
        stdout = self._process().stdout
        assert stdout is not None
        while True:
            raw = await stdout.readline()
            if not raw:
                return None
            try:
                return parse_agent_message(raw)
            except ProtocolError as exc:
                text = raw.decode("utf-8", "replace").rstrip()
                self._stderr.append(_clip(f"(non-protocol output: {exc}) {text}"))

    async def send(self, message: Request) -> None:
        stdin = self._process().stdin
        assert stdin is not None
        stdin.write((format_message(message) + "\n").encode("utf-8"))
        await stdin.drain()

    async def request(self, payload: dict, on_progress: OnProgress | None = None) -> Outcome:
        """Sends a profile request; returns its outcome (a result or a comparison, checked
        against the schema: results.SchemaMismatch when it is neither), raises AgentFailure on
        error or cancel."""
        request_id = payload.setdefault("id", f"req-{os.getpid()}-{next(_ids)}")
        self.last_progress = None
        self.cancelled_answer = None
        self.archive = None
        if self.memory_cap_mb:
            payload["options"] = {"memory_cap_mb": self.memory_cap_mb, **payload.get("options", {})}
        self._disarm_idle_timer()
        try:
            await self.send(Profile(id=request_id, fields=payload))
        except ConnectionError:  # it had exited: a crash between runs, worth a fresh process
            code = await self._process().wait()
            await self._settle_stderr()
            raise self._died(code, payload.get("project_root")) from None
        try:
            while True:
                message = await self._next_or_hang()
                if message is None:
                    code = await self._process().wait()
                    await self._settle_stderr()
                    raise self._died(code, payload.get("project_root"))
                if isinstance(message, Progress) and message.id == request_id:
                    self.last_progress = message  # the phase a timeout names
                    if on_progress:
                        reported = on_progress(message)
                        if isinstance(reported, Awaitable):
                            await reported
                elif isinstance(message, ResultMessage) and message.id == request_id:
                    if (payload.get("options") or {}).get("artifacts_back"):
                        self.archive = await self._pushed_archive(request_id)
                    self.runs += 1
                    answer = outcomes.parse(message.result)
                    self.backend = outcomes.runs(answer)[0].data.get("backend", self.backend)
                    self._arm_idle_timer()
                    return answer
                elif isinstance(message, ErrorMessage) and message.id == request_id:
                    if message.kind == "restart" or message.error.get("exiting"):
                        await self.kill()  # it exits by itself; make sure before a new start
                    else:
                        self._arm_idle_timer()
                    raise AgentFailure(message.error)
        except asyncio.CancelledError:
            await self.cancel(request_id)
            raise

    async def files(self, sha256: list[str]) -> list[dict]:
        """The bytes of library files the last run executed, by their digests (``files``; see
        libraries/texts.py). Between requests: nothing else is in flight on the pipe."""
        request_id = f"files-{os.getpid()}-{next(_ids)}"
        await self.send(Files(id=request_id, sha256=sha256))
        while True:
            message = await self._next_or_hang()
            if message is None:
                raise AgentFailure(
                    {"kind": "internal", "type": "internal", "path": None, "line": None,
                     "traceback": None, "message": "the agent left while sending library files"}
                )  # fmt: skip
            if isinstance(message, FileContents) and message.id == request_id:
                return message.files

    async def _pushed_archive(self, request_id: str) -> bytes | None:
        """The artifacts the agent sends after a result whose request asked (``artifacts_back``);
        None when it could not (the target then fetches them its own way)."""
        while True:
            message = await self._next_or_hang()
            if message is None:
                return None
            if isinstance(message, ArtifactArchive) and message.id == request_id:
                try:
                    return base64.b64decode(message.data or "", validate=True) or None
                except ValueError:  # binascii.Error: a garbled line; fetched the other way
                    return None

    async def take_archive(self, run_dir: str) -> bytes | None:
        """The last request's pushed artifacts (once), for ``target.collect``."""
        archive, self.archive = self.archive, None
        return archive

    async def _next_or_hang(self) -> AgentMessage | None:
        """The next message; a ping after ``stall_s`` of silence, a hang after two."""
        try:
            return await within(self._read(), self.stall_s)
        except asyncio.TimeoutError:
            pass
        await self.send(Ping(id="stall"))
        try:
            return await within(self._read(), self.stall_s)
        except asyncio.TimeoutError:
            await self.kill()
            raise AgentFailure(
                {
                    "kind": "internal",
                    "type": "hung",
                    "message": f"the agent stopped answering "
                    f"for {2 * self.stall_s:g} s and was killed",
                    "path": None,
                    "line": None,
                    "traceback": None,
                    "retry": True,
                }
            ) from None

    def _died(self, code: int, project_root: str | None = None) -> AgentFailure:
        if isinstance(self.target, SshTarget) and code == 255:
            return agent_failure(
                "environment",
                f"the connection to {self.target.host} dropped during the run "
                f"({self.stderr_tail(1)}); the agent there stops by itself when its input closes",
            )
        how = f"exited (code {code})"
        if code < 0:
            try:
                how = f"crashed ({signal.Signals(-code).name})"
            except ValueError:
                how = f"crashed (signal {-code})"
        where = self._crash_site(project_root)
        at = f" in {where[0]}:{where[1]}" if where else ""
        failure = agent_failure(
            "internal", f"the agent {how}{at} during the run:\n{self.stderr_tail()}"
        )
        if where:
            failure.error.update(path=where[0], line=where[1])
        failure.error["retry"] = True  # a crash: worth one more try on a fresh process
        return failure

    def _crash_site(self, project_root: str | None) -> tuple[str, int] | None:
        """The innermost project frame of the stack faulthandler printed, as (relpath, line)."""
        if not project_root:
            return None
        root = project_root.rstrip("/") + "/"
        lines = list(self._stderr)
        headers = [i for i, t in enumerate(lines) if "most recent call first" in t]
        current = [i for i in headers if lines[i].startswith("Current thread")]
        if not headers:
            return None
        start = (current or headers)[-1]
        for text in lines[start + 1 :]:
            match = _FAULT_FRAME.match(text)
            if match is None:
                break
            if match["path"].startswith(root):
                return match["path"][len(root) :], int(match["line"])
        return None

    async def cancel(self, request_id: str, grace_s: float = CANCEL_GRACE_S) -> None:
        """Asks the agent to stop; kills its process group if it has not answered in time."""
        if not self.alive():
            return
        try:
            await self.send(Cancel(id=request_id))
        except (ConnectionError, RuntimeError):
            pass
        try:
            answer = await asyncio.wait_for(self._wait_for_answer(request_id), grace_s)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            await self.kill()
            return
        self.cancelled_answer = answer  # where the cancel stopped the code (a timeout says it)
        if answer is None or (isinstance(answer, ErrorMessage) and answer.error.get("exiting")):
            # The agent leaves (the cancel stopped an import): wait until it has, or the next
            # run would write to a closed pipe.
            await self.kill()

    async def _wait_for_answer(self, request_id: str) -> ResultMessage | ErrorMessage | None:
        while True:
            message = await self._read()
            if message is None:
                return None
            if isinstance(message, (ResultMessage, ErrorMessage)) and message.id == request_id:
                return message

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def kill(self) -> None:
        if not self.alive():
            self._reap_group()
            return
        proc = self._process()
        await self.target.kill()  # remote: the agent's process group on the host
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                proc.kill()
            except ProcessLookupError:
                pass  # it ended on its own meanwhile (an agent leaving after a cancel)
        await proc.wait()

    def _reap_group(self) -> None:
        """Kills what the user's code started and left in the agent's process group (a forked
        worker, a `subprocess.Popen` never waited for) once the agent itself has ended: the group
        outlives its leader while any member lives."""
        if self.proc is not None and self.proc.returncode is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    async def close(self) -> None:
        self._disarm_idle_timer()
        if self.alive():
            proc = self._process()
            try:
                await self.send(Shutdown())
                if proc.stdin is not None:
                    proc.stdin.close()
                await asyncio.wait_for(proc.wait(), 5)
            except (asyncio.TimeoutError, ConnectionError, RuntimeError):
                await self.kill()
        self._reap_group()
        if self._stderr_task:
            self._stderr_task.cancel()


@dataclass
class ProfileRequest:
    """What the user asked for, before it becomes protocol JSON."""

    variants: list[dict]  # {"path" (absolute or project-relative), "qualname", ...}
    project_root: Path
    backend: str = RUN_DEFAULTS["backend"]
    warmup: int = RUN_DEFAULTS["warmup"]
    steps: int = RUN_DEFAULTS["steps"]
    repeats: int = RUN_DEFAULTS["repeats"]
    mode: str = RUN_DEFAULTS["mode"]
    device: str | None = None
    inputs: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # unsaved buffers: path -> text
    options: dict = field(default_factory=dict)
    timeout_s: float | None = None  # the whole run; first Neuron compiles take minutes
    nproc_per_node: int = 1  # > 1: the agent runs that many ranks under torchrun (agent/ranks/)

    def payload(self, store: Store, target_name: str) -> dict:
        root = self.project_root
        variants = []
        for variant in self.variants:
            v = dict(variant)
            v["path"] = _relative(root, v["path"])
            variants.append(v)
        return {
            "project_root": str(root),
            "variants": variants,
            "backend": self.backend,
            "warmup": self.warmup,
            "steps": self.steps,
            "repeats": self.repeats,
            "mode": self.mode,
            "device": self.device,
            "inputs": self.inputs,
            "files": {_relative(root, p): text for p, text in self.files.items()},
            "options": self.options,
            "artifacts_dir": str(store.staging_dir()),
            "context": {"target": target_name, "git_commit": project.git_commit(root)},
            **({"nproc_per_node": self.nproc_per_node} if self.nproc_per_node != 1 else {}),
        }


def _relative(root: Path, path: str) -> str:
    absolute = Path(path) if os.path.isabs(path) else root / path
    try:
        return absolute.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(absolute)


async def run_profile(
    request: ProfileRequest,
    store: Store,
    target: Target | None = None,
    on_progress: OnProgress | None = None,
    agent: AgentProcess | None = None,
) -> Outcome:
    """Runs a request on the target and stores every run; returns the result or comparison.

    A warm ``agent`` may be passed (and stays alive); otherwise one is started and closed.
    An agent that crashed, hung or asked for a fresh process is replaced and the run retried
    once; the results' warnings say so.
    """
    target = target or LocalTarget()
    own_agent = agent is None
    agent = agent or AgentProcess(target)
    try:
        work = _run_with_retry(request, store, target, agent, on_progress)
        outcome = await within(work, request.timeout_s)
    except asyncio.TimeoutError:
        raise timed_out(request.timeout_s, agent) from None
    finally:
        if own_agent:
            await agent.close()
    await finish(outcome, store, target)
    return outcome


async def finish(outcome: Outcome, store: Store, target: Target) -> None:
    """What every answered run gets before it is stored, and the storing (also multihost.py's)."""
    for run in outcomes.runs(outcome):
        # Neuron: Explorer's device summary (MFU, MBU, advice) joins the run before it is stored.
        await asyncio.to_thread(summary.attach, run.data, store.staging_dir() / run.run_id)
        # The static rules on the library code the run executed, with its measured cost: the
        # files of this machine, or a remote host's as its agent sent them (libraries/texts.py).
        if isinstance(target, LocalTarget) or library_texts.is_remote(run.data):
            await asyncio.to_thread(library_texts.attach, run.data)
    await asyncio.to_thread(_store_outcome, store.root.parent, store.cap_bytes, outcome)


def _store_outcome(project_root: Path, cap_bytes: int, outcome: Outcome) -> None:
    """Stores every run of ``outcome``, in a worker thread on a connection of its own: storing
    fsyncs and then walks the whole artifacts tree for the size cap, which the language
    server's loop must not wait on (and a sqlite connection stays in the thread that opened
    it). Readers on other connections see the rows once committed (WAL)."""
    with Store(project_root, cap_bytes=cap_bytes) as own:
        if isinstance(outcome, ComparisonResult):
            for variant in outcome.variants:
                own.add(variant.data, comparison_id=outcome.comparison_id)
        else:
            own.add(outcome.data)


async def _run_with_retry(
    request: ProfileRequest,
    store: Store,
    target: Target,
    agent: AgentProcess,
    on_progress: OnProgress | None,
) -> Outcome:
    notes: list[str] = []
    for attempt in range(2):
        try:
            outcome = await _run_once(request, store, target, agent, on_progress)
        except AgentFailure as failure:
            retry = failure.kind == "restart" or failure.error.get("retry")
            if attempt == 0 and retry:
                why = failure.error.get("message", "").splitlines()[0]
                notes.append(
                    f"the agent was replaced by a fresh process and the run retried: {why}"
                )
                await agent.kill()
                continue
            raise
        for run in outcomes.runs(outcome):
            run.data["warnings"].extend(notes)
        return outcome
    raise AssertionError("unreachable")  # pragma: no cover


async def _run_once(
    request: ProfileRequest,
    store: Store,
    target: Target,
    agent: AgentProcess,
    on_progress: OnProgress | None,
) -> Outcome:
    staged = None
    try:
        if not agent.alive():
            await agent.start()
        try:
            payload = await asyncio.to_thread(request.payload, store, target.name)  # runs git
            staged = await target.stage(payload, store)
        except TargetError as exc:
            raise agent_failure("environment", str(exc)) from None
        outcome = await agent.request(staged.payload, on_progress)  # checked there
        try:
            await target.collect(staged, outcome, store, agent.take_archive)
        except TargetError as exc:
            raise agent_failure("environment", str(exc)) from None
        await fetch_library_texts(agent, outcome)
        return outcome
    finally:
        if staged is not None:
            await asyncio.shield(target.discard(staged))


async def fetch_library_texts(agent: AgentProcess, outcome: Outcome) -> None:
    """A remote run's library files the local cache lacks, over the agent's own connection; a
    failure costs the run its library findings (a warning says why), never the run."""
    runs = [run.data for run in outcomes.runs(outcome)]
    if not any(library_texts.is_remote(run) for run in runs):
        return
    try:
        await library_texts.fetch(agent.files, runs)
    except (AgentFailure, ConnectionError, OSError) as exc:
        for run in runs:
            run.setdefault("warnings", []).append(f"library files not read from the host: {exc}")
