"""Profile requests from the editor: checked, queued per target, run on a warm agent, shown.

A request is checked when it is made (the function exists, the target is known, allowed and
local), then queued (see ``queue``). Running it sends the buffer text of every open, unsaved
file of the project with it (the user profiles what they see), reports the agent's phases as
progress, stores the result, places it on the open document through the edits made meanwhile,
and asks the client to refresh lenses, hints and diagnostics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types

from trnlens import multihost, project
from trnlens.agent.protocol import Progress
from trnlens.jobs import AgentFailure, AgentProcess, ProfileRequest, run_profile
from trnlens.lsp import format, missing_inputs
from trnlens.lsp import report as run_report
from trnlens.lsp.command_args import ReportArgument
from trnlens.lsp.context import Context
from trnlens.lsp.documents import analyse
from trnlens.lsp.progress import RunProgress
from trnlens.lsp.queue import Job, RunQueue
from trnlens.outcome import Outcome, runs
from trnlens.results import Result, SchemaMismatch
from trnlens.settings import Settings, SettingsError, TargetSettings
from trnlens.store import StoreError
from trnlens.targets import registry
from trnlens.targets.local import LocalTarget
from trnlens.targets.nodes import NodesTarget
from trnlens.targets.ssh import SshTarget, TargetError
from trnlens.timeouts import within

log = logging.getLogger(__name__)


class RequestRefused(Exception):
    """The request cannot run; the message says why and what to do."""


class Runs:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.queue = RunQueue(self._execute, self._dropped, self._settled)
        self._agents: dict[tuple, AgentProcess] = {}
        # every SSH host this server reached (agents, Neuron Explorer): their shared connections
        # (ControlPersist masters) end with the server, not ten minutes after it
        self._ssh_hosts: dict[tuple, SshTarget] = {}
        self._toasts: set[asyncio.Future] = set()  # comparisons' "Open report" questions
        # Called with a finished run before its lens is drawn (Watching.settle_change: its "vs
        # previous", so the lens is drawn once, with its final words); set by services.build
        self.before_show: Callable[[Any, Result], Awaitable[None]] | None = None
        # What the pending jobs' lenses read when last drawn (job token -> "running", "queued
        # (#2)"): see _redraw_pending
        self._drawn: dict[str, str] = {}

    def reached(self, target: LocalTarget | SshTarget | NodesTarget) -> None:
        """Notes a target whose SSH connection must be closed when the server leaves."""
        for one in target.nodes if isinstance(target, NodesTarget) else [target]:
            if isinstance(one, SshTarget):
                self._ssh_hosts.setdefault((one.host, tuple(one.ssh_args)), one)

    # -- requests
    async def profile(self, uri: str, qualname: str, target_name: str | None = None) -> dict:
        root, path, target = self._check(uri, qualname, target_name)
        job, new = self.queue.submit(Job(uri, qualname, target.name))
        position = self.queue.position(job)
        if new:
            await self._begin(job, f"Profile {qualname}", root, path, "profile")
        return {
            "token": job.token,
            "state": job.state,
            "position": position,
            "target": job.target,
            "alreadyPending": not new,
        }

    async def compare(
        self,
        uri: str,
        qualname: str,
        make_variants: Callable[[Path], list[dict]],
        on_result: Callable[[Job, dict, Any], dict],
        target_name: str | None = None,
        title: str | None = None,
    ) -> tuple[CompareJob, bool]:
        """Queues one agent run of several variants of a function (same checks and lane as a
        profile; a profile and a comparison of the same function may both be pending).
        ``make_variants(path)`` gives the request's variants (it may refuse with RequestRefused);
        ``on_result(job, outcome, mark)`` shows the comparison and returns the answer, a dict
        with at least ``message``. ``job.context["done"]`` resolves to that answer (plus
        ``token`` and ``target``), to ``{"cancelled": True}``, or raises RequestRefused."""
        root, path, target = self._check(uri, qualname, target_name)
        variants = make_variants(path)
        job, new = self.queue.submit(CompareJob(uri, qualname, target.name))
        if new:
            done = asyncio.get_running_loop().create_future()
            job.context.update(variants=variants, on_result=on_result, done=done, verb="comparing")
            await self._begin(job, title or f"Compare {qualname}", root, path, "compare")
        return job, new  # type: ignore[return-value]

    def _check(
        self, uri: str, qualname: str, target_name: str | None
    ) -> tuple[Path, Path, TargetSettings]:
        """Refuses (RequestRefused) what cannot run: bad settings, an untrusted workspace, an
        unknown target, a function the file does not have."""
        path = self.ctx.path_of(uri)
        root = project.find_root(path)
        doc = self.ctx.documents.get(uri)
        text = doc.text if doc is not None else _read(path)
        try:
            settings = self.ctx.config.resolve(root)
        except SettingsError as exc:
            raise RequestRefused(f"trnlens settings: {exc}") from None
        if not self.ctx.config.trusted:
            # Profiling imports and runs the repository's code: never in an untrusted workspace.
            raise RequestRefused(
                "this workspace is not trusted: trnlens only analyses its code; trust the "
                "workspace to profile (a profile imports and runs the repository's code)"
            )
        target = _allowed_target(settings, target_name)
        if doc is not None:
            analysis = doc.analysis()
            known = analysis.symbols if analysis else {}
        else:
            try:
                known = analyse(text).symbols
            except SyntaxError as exc:
                raise RequestRefused(f"{path.name} does not parse: {exc}") from None
        if qualname not in known:
            raise RequestRefused(f"{path.name} has no function, method or nn.Module {qualname!r}")
        return root, path, target

    async def _begin(self, job: Job, title: str, root: Path, path: Path, kind: str) -> None:
        position = self.queue.position(job)
        ready = asyncio.Event()
        progress = self.ctx.client.progress(job.token, title, kind, job.qualname)
        job.context.update(ready=ready, progress=progress, root=root, path=path)
        ahead = self.queue.running(job.target)
        queued = ahead is not None and ahead is not job
        waiting = (
            f"queued behind {ahead.qualname} on {job.target} ({position} ahead)"
            if queued and ahead is not None
            else f"starting on {job.target}"
        )
        await progress.begin(waiting, "queued" if queued else "starting")
        ready.set()  # only now may the lane start it: progress exists before any report
        self._redraw_pending()

    def job_state(self, uri: str, qualname: str, kind: str = "profile") -> str | None:
        """The lens text for a pending job: 'running' or 'queued (#2)' (``kind`` "compare": the
        function's pending comparison instead of its profile). The run's phase is not in it:
        the status bar and the progress notification say it (see _redraw_pending)."""
        if kind == "compare":
            key = CompareJob(uri, qualname, "").key
            job = next((j for j in self.queue.jobs() if j.key == key), None)
        else:
            job = self.queue.find(uri, qualname)
        return None if job is None else self._lens_state(job)

    def _lens_state(self, job: Job) -> str:
        return "running" if job.state == "running" else f"queued (#{self.queue.position(job)})"

    def _redraw_pending(self) -> None:
        """Asks the client to redraw the lenses only when a pending job's lens would read
        differently. A redraw replaces every lens of the editor, and VS Code drops a click on a
        lens it has just replaced (the click's command is released with the old lens list:
        "Actual command not found" in the extension host's log, nothing reaches the server).
        The lens of a pending run is its ■ cancel button, so it must not be redrawn under the
        user's pointer for nothing: a run's phases go to its progress, not to its lens."""
        drawn = {job.token: self._lens_state(job) for job in self.queue.jobs()}
        if drawn != self._drawn:
            self._drawn = drawn
            self.ctx.refresh_lenses()

    def pending(self, uri: str) -> frozenset[str]:
        """Qualnames in ``uri`` with a profile queued or running (their lenses show its state)."""
        return frozenset(j.qualname for j in self.queue.jobs() if j.key == (uri, j.qualname))

    async def cancel(self, uri: str | None = None, qualname: str | None = None) -> int:
        """Cancels matching jobs (all when no uri is given); returns how many."""
        matching = [
            job
            for job in self.queue.jobs()
            if uri is None or (job.uri == uri and qualname in (None, job.qualname))
        ]
        done = 0
        for job in matching:
            done += await self.queue.cancel(job)
        return done

    async def cancel_token(self, token: str) -> None:
        for job in self.queue.jobs():
            if job.token == token:
                await self.queue.cancel(job)

    async def close(self) -> None:
        await self.queue.close()
        for agent in self._agents.values():
            await agent.close()
            self.reached(agent.target)  # its shared ssh connection goes too
        self._agents.clear()
        hosts, self._ssh_hosts = list(self._ssh_hosts.values()), {}
        for target in hosts:
            await asyncio.to_thread(target.close_master)

    # -- running
    async def _dropped(self, job: Job) -> None:
        job.context["progress"].end("cancelled before it started", "cancelled")
        _settle(job, {"cancelled": True})

    def _settled(self, job: Job) -> None:
        """The job left the queue: its lens goes back to ▶ Profile (or shows the run's figures
        or failure). Refreshing before this point would show the job as still pending."""
        self._drawn = {job.token: self._lens_state(job) for job in self.queue.jobs()}
        self.ctx.refresh_lenses()

    async def _execute(self, job: Job) -> None:
        await job.context["ready"].wait()
        progress: RunProgress = job.context["progress"]
        root: Path = job.context["root"]
        doc = self.ctx.documents.get(job.uri)
        mark = doc.mark() if doc is not None else None
        self._redraw_pending()  # "queued (#1)" -> "running", when it was drawn queued
        try:
            settings = self.ctx.config.resolve(root)
            target = _allowed_target(settings, job.target)
            outcome = await within(
                self._run(job, settings, target, progress), settings.timeout_seconds
            )
        except asyncio.CancelledError:
            progress.end("cancelled", "cancelled")
            _settle(job, {"cancelled": True})
            raise
        except asyncio.TimeoutError:
            limit = f"{settings.timeout_seconds:g} s"
            self._fail(job, f"timed out after {limit} (trnlens.timeoutSeconds)")
        except (RequestRefused, SettingsError, StoreError) as exc:
            self._fail(job, str(exc))
        except AgentFailure as failure:
            if failure.kind == "cancelled":
                progress.end("cancelled", "cancelled")
                _settle(job, {"cancelled": True})
            elif missing_inputs.is_missing_inputs(failure.error):
                # one sentence for the toast; the lens, a diagnostic and its quick fix do the rest
                log.info("%s: %s", job.qualname, failure)
                message = missing_inputs.short_message(str(failure))
                if doc is not None:
                    failed = missing_inputs.InputsFailure(job.qualname, message)
                    doc.inputs_failures[job.qualname] = failed
                self._fail(job, message, failure.kind)
                self.ctx.publish(job.uri, force=True)
            else:
                self._fail(job, f"{failure.kind} error: {failure}", failure.kind)
        except (SchemaMismatch, OSError) as exc:
            log.exception("run of %s failed", job.qualname)
            self._fail(job, str(exc))
        else:
            shown = outcome if isinstance(outcome, Result) else outcome.variants[0]
            if doc is not None and self.before_show is not None and not shown.error:
                await self.before_show(doc, shown)
            if "on_result" in job.context:
                self._compared(job, outcome, mark)
            else:
                self._show(job, outcome, mark)
        finally:
            if doc is not None and mark is not None:
                doc.release(mark)
            _settle(job, error="the run ended without a result (see the server log)")

    async def _run(
        self, job: Job, settings: Settings, target: TargetSettings, progress: RunProgress
    ):
        root: Path = job.context["root"]
        variants = job.context.get("variants") or [
            {"path": str(job.context["path"]), "qualname": job.qualname}
        ]
        request = ProfileRequest(
            variants=variants,
            project_root=root, backend=settings.backend, warmup=settings.warmup,
            steps=settings.steps, repeats=settings.repeats, mode=settings.mode,
            files=self.ctx.unsaved_files(root), nproc_per_node=target_nproc(target),
        )  # fmt: skip
        runner = build_target(target, root, settings.targets)

        def on_progress(state: Progress) -> None:
            # The phase goes to the status bar and the progress notification; the lens (the ■
            # cancel button) is not redrawn for it (see _redraw_pending).
            job.phase = state.phase
            progress.report(state.words(), state)

        store = self.ctx.run_store(root)
        if isinstance(runner, NodesTarget):  # several hosts: their agents start for the run
            progress.report(f"starting the agents on {runner.describe()}")
            self.reached(runner)
            return await multihost.run_profile(request, store, runner, on_progress=on_progress)
        agent = self._agent(runner)
        progress.report(f"starting the agent on {target.name}" if not agent.alive() else "sent")
        return await run_profile(request, store, runner, on_progress=on_progress, agent=agent)

    def _agent(self, target: LocalTarget | SshTarget) -> AgentProcess:
        """A warm agent per target: torch is imported once, not once per run."""
        # Every field (repr hides the secret ones): a changed setting, a new agent.
        settings = {f.name: getattr(target, f.name) for f in dataclasses.fields(target) if f.init}
        key = (type(target).__name__, json.dumps(settings, sort_keys=True, default=str))
        agent = self._agents.get(key)
        if agent is None:
            agent = self._agents[key] = AgentProcess(target)
        return agent

    def _show(self, job: Job, outcome: Outcome, mark) -> None:
        progress: RunProgress = job.context["progress"]
        result = outcome if isinstance(outcome, Result) else outcome.variants[0]
        doc = self.ctx.documents.get(job.uri)
        if doc is not None:
            doc.place(result, mark)
        if result.error:
            message = f"{job.qualname} raised: {result.error.get('message')}"
            progress.end(message, "raised")
            # one notification per failure (the extension's README): the progress ends quietly
            where = result.error.get("path"), result.error.get("line")
            at = f" (at {where[0]}:{where[1]})" if all(where) else ""
            self.ctx.show(f"trnlens: {message}{at}", types.MessageType.Error)
        else:
            progress.end(f"{job.qualname}: {format.headline(result)}", "succeeded")
        self.ctx.after_run(job.uri)

    def _compared(self, job: Job, outcome: Outcome, mark) -> None:
        answer = job.context["on_result"](job, outcome.data, mark)
        raised = any(run.error for run in runs(outcome))
        job.context["progress"].end(answer["message"], "raised" if raised else "succeeded")
        self._tell_compared(job, answer)
        self.ctx.after_run(job.uri)
        _settle(job, {**answer, "token": job.token, "target": job.target})

    def _tell_compared(self, job: Job, answer: dict) -> None:
        """A toast short enough not to be cut (the lens's words), with an ``Open report`` button
        where the client shows buttons; the whole message is the command's answer and the
        progress's end. A client without buttons gets the whole message."""
        if not self.ctx.client.can_ask():
            self.ctx.show(f"trnlens: {answer['message']}")
            return
        short = f"trnlens: compared {job.qualname}: {answer['lens']}"
        run_id = (answer.get("variants") or [{}])[0].get("runId")
        task = asyncio.ensure_future(self._offer_report(short, job.uri, run_id))
        self._toasts.add(task)
        task.add_done_callback(self._toasts.discard)

    async def _offer_report(self, message: str, uri: str, run_id: str | None) -> None:
        try:
            choice = await self.ctx.client.ask(message, [OPEN_REPORT] if run_id else [])
            if choice == OPEN_REPORT:
                argument = ReportArgument(uri=uri, run_id=run_id, show=True)
                await run_report.report(self.ctx, argument)
        except Exception:  # the user closed the editor meanwhile, or the report failed
            log.exception("the comparison's report could not be opened")

    def _fail(self, job: Job, message: str, kind: str = "error") -> None:
        job.context["progress"].end(f"failed: {message}", "failed")
        severity = types.MessageType.Warning if kind == "usage" else types.MessageType.Error
        verb = job.context.get("verb", "profiling")
        if "done" not in job.context:
            # A profile's command answered long ago: the message is the only way to tell. A
            # comparison's command is still waiting: its error answer tells instead (once).
            self.ctx.show(f"trnlens: {verb} {job.qualname} failed: {message}", severity)
        # the lens shows the failure once the job has left the queue (_settled redraws it)
        _settle(job, error=message, severity="warning" if kind == "usage" else "error")


OPEN_REPORT = "Open report"


@dataclass(eq=False)
class CompareJob(Job):
    """A comparison run: its own key, so that it queues beside a profile of the same function."""

    @property
    def key(self) -> tuple[str, str, str]:  # type: ignore[override]
        return (self.uri, self.qualname, "compare")


def _settle(
    job: Job, value: dict | None = None, error: str | None = None, severity: str = "error"
) -> None:
    """Answers whoever waits on the job (a comparison command), once."""
    done = job.context.get("done")
    if done is None or done.done():
        return
    if error is not None:
        refused = RequestRefused(error)
        refused.severity = severity  # type: ignore[attr-defined]
        done.set_exception(refused)
    else:
        done.set_result(value)


def _allowed_target(settings: Settings, name: str | None) -> TargetSettings:
    try:
        target = settings.target_named(name)
    except KeyError as exc:
        raise RequestRefused(str(exc.args[0])) from None
    try:
        build_target(target, Path("."), settings.targets)
    except TargetError as exc:
        raise RequestRefused(f"trnlens.targets: {exc}") from None
    return target


def target_nproc(target: TargetSettings | None, strict: bool = True) -> int:
    """A target's ``nproc_per_node`` (ranks per run under torchrun; 1 when unset). A bad value
    refuses the run (``strict``) or counts as 1 (the lens's title)."""
    value = (target.fields if target is not None else {}).get("nproc_per_node", 1)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if strict and target is not None:  # no target: the value is the default, 1
        raise RequestRefused(
            f"trnlens.targets.{target.name}.nproc_per_node must be a positive integer, "
            f"not {value!r}"
        )
    return 1


def build_target(
    target: TargetSettings, root: Path, others: dict[str, TargetSettings] | None = None
) -> LocalTarget | SshTarget | NodesTarget:
    """The runnable target for a settings entry (local, SSH, or several hosts: ``others``, every
    target by name, holds its nodes)."""
    if target.kind == "nodes":
        defined = {name: _fields_of(t) for name, t in (others or {}).items()}
        return registry.from_fields(target.name, _fields_of(target), defined)
    if target.is_local:
        return LocalTarget(
            name=target.name, python=_interpreter(target, root), env=target.env,
            nproc_per_node=target_nproc(target),
        )  # fmt: skip
    fields = {**target.fields, "kind": target.kind, "env": target.env}
    if target.python:
        fields["python"] = target.python
    built = registry.from_fields(target.name, fields)
    if isinstance(built, LocalTarget):  # pragma: no cover - kind says ssh here
        built.python = _interpreter(target, root)
    return built


def _fields_of(target: TargetSettings) -> dict:
    """A settings entry as the registry's fields (env and python only where set)."""
    fields = {**target.fields, "kind": target.kind}
    if target.env:
        fields["env"] = target.env
    if target.python:
        fields["python"] = target.python
    return fields


def _interpreter(target: TargetSettings, root: Path) -> str | None:
    python = target.python
    if python and not Path(python).is_absolute() and ("/" in python or "\\" in python):
        return str(root / python)  # a path inside the project, such as .venv/bin/python
    return python


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RequestRefused(f"cannot read {path}: {exc}") from None
