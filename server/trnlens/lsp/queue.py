"""One run at a time per target; the others wait in line, and a function is never in line twice.

Concurrent runs on one machine spoil each other's figures, so each target has a lane worked by
one asyncio task. Every job runs as its own task, so cancelling a job (``task.cancel()``) reaches
the agent through :func:`trnlens.jobs.run_profile` while the lane goes on with the next job.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

_numbers = itertools.count(1)


@dataclass(eq=False)
class Job:
    uri: str
    qualname: str
    target: str
    number: int = field(default_factory=lambda: next(_numbers))
    state: str = "queued"  # queued -> running -> done
    phase: str = ""
    task: asyncio.Task | None = None
    context: dict[str, Any] = field(default_factory=dict)  # whatever the executor needs

    @property
    def key(self) -> tuple[str, str]:
        return (self.uri, self.qualname)

    @property
    def token(self) -> str:
        return f"trnlens-run-{self.number}"


class RunQueue:
    def __init__(
        self,
        execute: Callable[[Job], Coroutine[Any, Any, None]],
        dropped: Callable[[Job], Coroutine[Any, Any, None]],
        settled: Callable[[Job], None] | None = None,
    ):
        self._execute = execute  # runs a job; cancellation arrives as CancelledError
        self._dropped = dropped  # told when a job is cancelled before it started
        # told once a job has left the queue (done, failed, cancelled or dropped): only then do
        # the lenses stop showing it as pending, so that is when they must be refreshed
        self._settled = settled or (lambda job: None)
        self._lanes: dict[str, deque[Job]] = {}
        self._running: dict[str, Job] = {}
        self._workers: dict[str, asyncio.Task] = {}

    def jobs(self) -> list[Job]:
        running = list(self._running.values())
        return running + [job for lane in self._lanes.values() for job in lane]

    def find(self, uri: str, qualname: str) -> Job | None:
        return next((j for j in self.jobs() if j.key == (uri, qualname)), None)

    def submit(self, job: Job) -> tuple[Job, bool]:
        """Queues ``job``; returns the job already pending for the same function instead, if any."""
        existing = next((j for j in self.jobs() if j.key == job.key), None)
        if existing is not None:
            return existing, False
        self._lanes.setdefault(job.target, deque()).append(job)
        if job.target not in self._workers:
            self._workers[job.target] = asyncio.create_task(self._work(job.target))
        return job, True

    def position(self, job: Job) -> int:
        """0 while running, else how many jobs go before it (the running one included)."""
        if job.state == "running":
            return 0
        lane = self._lanes.get(job.target, deque())
        ahead = list(lane).index(job) if job in lane else 0
        return ahead + (1 if job.target in self._running else 0)

    def running(self, target: str) -> Job | None:
        return self._running.get(target)

    async def cancel(self, job: Job) -> bool:
        lane = self._lanes.get(job.target)
        if job.state == "queued" and lane is not None and job in lane:
            lane.remove(job)
            job.state = "done"
            await self._dropped(job)
            self._settled(job)
            return True
        if job.state == "running" and job.task is not None and not job.task.done():
            job.task.cancel()
            await asyncio.wait([job.task])  # the agent is told, and killed after its grace period
            if self._running.get(job.target) is job:
                # settle now rather than when the lane's worker next wakes: whoever cancelled
                # (a lens click) sees the job gone as soon as this returns
                job.state = "done"
                self._running.pop(job.target, None)
                self._settled(job)
            return True
        return False

    async def _work(self, target: str) -> None:
        lane = self._lanes[target]
        try:
            while lane:
                job = lane.popleft()
                job.state = "running"
                self._running[target] = job
                job.task = asyncio.create_task(self._execute(job))
                try:
                    await asyncio.wait([job.task])
                finally:
                    job.state = "done"
                    if self._running.get(target) is job:  # not settled by cancel() already
                        self._running.pop(target, None)
                        self._settled(job)
        finally:
            self._workers.pop(target, None)

    async def close(self) -> None:
        """Cancels everything (server shutdown)."""
        for job in self.jobs():
            await self.cancel(job)
