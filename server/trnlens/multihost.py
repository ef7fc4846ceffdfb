"""A run across several hosts: one agent per host, one torchrun each, one result.

The server chooses what the hosts must share before any starts: the run id (every host files its
ranks' profiles under it) and the rendezvous, a free port on the first host at the address the
others reach it by. Each host's agent gets the request with ``nodes`` (agent/ranks/); the
first host's answers with the merged run (its rank 0 gathered every rank's outcome), the others
with their own ranks' part, whose profiles are collected into the same run folder. The chrome
trace of every rank on one axis is written here, once every host's traces have arrived.

A failure on any host (its agent's error, a rank's error, a lost connection), a cancel or the
timeout stops every host: each agent is asked to cancel and then killed with its process group
(each remote agent also stops on EOF), so no torchrun and no rank is left anywhere. The error
reported is the one that caused the others: a rank that lost its peer on another host is not it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import uuid

from trnlens import outcome as outcomes
from trnlens.agent.ranks import trace as ranktrace
from trnlens.jobs import (
    AgentFailure,
    AgentProcess,
    OnProgress,
    ProfileRequest,
    agent_failure,
    fetch_library_texts,
    finish,
    timed_out,
)
from trnlens.outcome import Outcome, Result
from trnlens.store import Store
from trnlens.targets.base import Staged, TargetError
from trnlens.targets.nodes import NodesTarget
from trnlens.timeouts import within

CAUSE_GRACE_S = 15.0  # how long the other hosts may take to say why, once one lost its peer


async def run_profile(
    request: ProfileRequest,
    store: Store,
    target: NodesTarget,
    on_progress: OnProgress | None = None,
) -> Outcome:
    """Runs ``request`` on every host of ``target`` and stores the merged run."""
    if len(request.variants) != 1:
        raise agent_failure("usage", "a multi-host run profiles one function (no comparisons)")
    agents = [AgentProcess(node) for node in target.nodes]
    try:
        work = _run(request, store, target, agents, on_progress)
        outcome = await within(work, request.timeout_s)
    except asyncio.TimeoutError:
        raise timed_out(request.timeout_s, agents[0]) from None
    finally:
        await asyncio.shield(_stop_all(agents))
    await finish(outcome, store, target.nodes[0])
    return outcome


async def _run(
    request: ProfileRequest,
    store: Store,
    target: NodesTarget,
    agents: list[AgentProcess],
    on_progress: OnProgress | None,
) -> Outcome:
    staged: list[Staged | None] = [None] * len(agents)
    try:
        try:
            await asyncio.gather(*(agent.start() for agent in agents))
            first = target.nodes[0]
            rendezvous = {
                "count": len(agents), "run_id": _new_run_id(), "master_addr": first.reach(),
                "master_port": await first.free_port(),
            }  # fmt: skip
            payload = await asyncio.to_thread(request.payload, store, target.name)
            payload["nproc_per_node"] = request.nproc_per_node
            for index, node in enumerate(target.nodes):
                nodes = {**rendezvous, "rank": index, "host": node.name}
                staged[index] = await node.stage({**payload, "nodes": nodes}, store)
        except TargetError as exc:
            raise agent_failure("environment", str(exc)) from None
        try:
            answers = await _answers(agents, [s.payload for s in staged if s], on_progress)
        except _Failed as failed:
            if failed.answer is None:
                raise failed.failure from None
            # A rank's own code raised: as on one host, the run is a result with the error
            # (the editor shows it at the raising line); no profile was kept anywhere.
            data = outcomes.runs(failed.answer)[0].data
            data["error"] = failed.failure.error
            _note_hosts(failed.answer, target, [])
            return failed.answer
        # The others' profiles first: the first host's folder (its merged result) lands last.
        for index in [*range(1, len(agents)), 0]:
            node, one = target.nodes[index], staged[index]
            assert one is not None
            try:
                await node.collect(one, answers[index], store, agents[index].take_archive)
            except TargetError as exc:
                raise agent_failure("environment", f"{node.describe()}: {exc}") from None
        outcome = answers[0]
        await asyncio.to_thread(_merged_trace, outcome, store)
        _note_hosts(outcome, target, answers)
        await fetch_library_texts(agents[0], outcome)
        return outcome
    finally:
        await asyncio.shield(
            asyncio.gather(
                *(node.discard(one) for node, one in zip(target.nodes, staged, strict=True) if one)
            )
        )


async def _answers(
    agents: list[AgentProcess], payloads: list[dict], on_progress: OnProgress | None
) -> list[Outcome]:
    """Every host's answer; the first failure stops them all and is raised (the cause)."""
    tasks = [
        asyncio.create_task(agent.request(payload, on_progress if index == 0 else None))
        for index, (agent, payload) in enumerate(zip(agents, payloads, strict=True))
    ]
    failures: dict[int, tuple[dict, Outcome | None]] = {}

    def note(done) -> None:
        for task in done:
            found = _error_of(task)
            if found is not None:
                failures[tasks.index(task)] = found

    try:
        pending = set(tasks)
        while pending and not failures:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            note(done)
        if failures:
            if pending and all(_lost(error) for error, _ in failures.values()):
                # A rank here lost its peer: the host where the cause is answers soon after
                # (its torchrun stops once its rank failed); give it a moment to say why.
                done, pending = await asyncio.wait(pending, timeout=CAUSE_GRACE_S)
                note(done)
            for task in pending:  # the others stop (cancelled, then killed)
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            index = min(failures, key=lambda i: (_lost(failures[i][0]), i))
            error, answer = failures[index]
            host = agents[index].target.name
            error = {**error, "host": host, "message": f"on {host}: {error.get('message', '')}"}
            raise _Failed(AgentFailure(error), answer)
        return [task.result() for task in tasks]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Failed(Exception):
    """The failure that caused the others (with the result it came in, if a rank's code raised)."""

    def __init__(self, failure: AgentFailure, answer: Outcome | None):
        super().__init__(failure.error.get("message"))
        self.failure = failure
        self.answer = answer


def _error_of(task: asyncio.Task) -> tuple[dict, Outcome | None] | None:
    """The task's error: the agent's (an AgentFailure), or a result's (a rank's code raised)."""
    if task.cancelled():
        return None
    exc = task.exception()
    if isinstance(exc, AgentFailure):
        return exc.error, None
    if exc is not None:
        raise exc
    answer = task.result()
    error = outcomes.runs(answer)[0].data.get("error")
    return (error, answer) if error else None


def _lost(error: dict) -> bool:
    """A rank that failed because a peer on another host went (not the cause)."""
    return bool(error.get("lost_peer") or error.get("collective"))


def _merged_trace(outcome: Outcome, store: Store) -> None:
    """Every rank's trace in one file, now that every host's are in the run folder."""
    data = outcomes.runs(outcome)[0].data
    rows = sorted(data.get("ranks") or [], key=lambda row: row["rank"])
    offsets = (data.get("alignment") or {}).get("offsets_us") or []
    ranks = [
        {"rank": row["rank"],
         "clock": {"host": row.get("host"),
                   "offset_us": offsets[row["rank"]] if row["rank"] < len(offsets) else 0.0}}
        for row in rows
    ]  # fmt: skip
    work = os.fspath(store.staging_dir() / data["run_id"])
    entry, why_not = ranktrace.write(work, ranks) if ranks else (None, None)
    if entry is not None and not any(a.get("kind") == entry["kind"] for a in data["artifacts"]):
        data["artifacts"].insert(0, entry)
    if why_not:
        data["warnings"].append(why_not)


def _note_hosts(outcome: Outcome, target: NodesTarget, answers: list[Outcome]) -> None:
    data = outcomes.runs(outcome)[0].data
    data["nodes"] = {"count": len(target.nodes), "rank": 0,
                     "hosts": [node.name for node in target.nodes]}  # fmt: skip
    data["target"] = target.name
    for node, answer in zip(target.nodes[1:], answers[1:], strict=False):
        theirs = answer.data if isinstance(answer, Result) else {}
        for warning in theirs.get("warnings") or []:
            if warning not in data["warnings"]:
                data["warnings"].append(f"{node.name}: {warning}")


def _new_run_id() -> str:
    """A run id as the agent makes them (resultdict.new_run_id, not imported: it pulls in the
    agent's measuring modules), chosen here because every host files under it."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{now}-{uuid.uuid4().hex[:8]}"


async def _stop_all(agents: list[AgentProcess]) -> None:
    """Every agent ends (a warm one is never kept: each run starts its hosts afresh)."""
    await asyncio.gather(*(agent.close() for agent in agents), return_exceptions=True)
