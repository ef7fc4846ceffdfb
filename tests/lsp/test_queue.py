"""One run at a time per target, a function never queued twice, cancel queued or running."""

from __future__ import annotations

import asyncio

from trnlens.lsp.queue import Job, RunQueue


class Recorder:
    """An executor whose jobs run until the test releases them."""

    def __init__(self):
        self.started: list[str] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []
        self.dropped: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}

    async def execute(self, job: Job) -> None:
        self.started.append(job.qualname)
        gate = self.gates.setdefault(job.qualname, asyncio.Event())
        try:
            await gate.wait()
        except asyncio.CancelledError:
            self.cancelled.append(job.qualname)
            raise
        self.finished.append(job.qualname)

    async def drop(self, job: Job) -> None:
        self.dropped.append(job.qualname)

    def release(self, qualname: str) -> None:
        self.gates.setdefault(qualname, asyncio.Event()).set()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_one_job_at_a_time_per_target_in_order():
    rec = Recorder()
    queue = RunQueue(rec.execute, rec.drop)
    a, _ = queue.submit(Job("u", "a", "local"))
    b, _ = queue.submit(Job("u", "b", "local"))
    other, _ = queue.submit(Job("u", "c", "remote"))
    await _settle()
    assert rec.started == ["a", "c"]  # another target runs beside, the same target waits
    assert (queue.position(a), queue.position(b)) == (0, 1)
    assert queue.running("local") is a
    rec.release("a")
    await _settle()
    assert rec.started == ["a", "c", "b"] and rec.finished == ["a"]
    rec.release("b")
    rec.release("c")
    await _settle()
    assert queue.jobs() == [] and a.state == b.state == other.state == "done"


async def test_the_same_function_is_never_queued_twice():
    rec = Recorder()
    queue = RunQueue(rec.execute, rec.drop)
    first, new = queue.submit(Job("u", "a", "local"))
    again, new_again = queue.submit(Job("u", "a", "local"))
    assert new and not new_again and again is first
    queue.submit(Job("u", "b", "local"))
    again_b, new_b = queue.submit(Job("u", "b", "local"))
    assert not new_b and again_b.state == "queued"
    assert [j.qualname for j in queue.jobs()] == ["a", "b"]
    await queue.close()


async def test_cancel_a_queued_job_drops_it_and_a_running_one_stops_it():
    rec = Recorder()
    queue = RunQueue(rec.execute, rec.drop)
    a, _ = queue.submit(Job("u", "a", "local"))
    b, _ = queue.submit(Job("u", "b", "local"))
    c, _ = queue.submit(Job("u", "c", "local"))
    await _settle()
    assert await queue.cancel(b)
    assert rec.dropped == ["b"] and queue.position(c) == 1
    assert await queue.cancel(a)
    assert rec.cancelled == ["a"]
    await _settle()
    assert rec.started == ["a", "c"]  # the lane goes on with the next job
    assert not await queue.cancel(a)  # nothing left to cancel
    rec.release("c")
    await _settle()
    assert rec.finished == ["c"]


async def test_every_job_is_settled_once_and_a_cancelled_one_is_gone_when_cancel_returns():
    rec = Recorder()
    settled: list[str] = []
    queue = RunQueue(rec.execute, rec.drop, lambda job: settled.append(job.qualname))
    a, _ = queue.submit(Job("u", "a", "local"))
    b, _ = queue.submit(Job("u", "b", "local"))
    c, _ = queue.submit(Job("u", "c", "local"))
    await _settle()
    assert await queue.cancel(a)
    # a lens refreshed right after the cancel command answers must already read ▶ Profile
    assert a not in queue.jobs() and settled == ["a"]
    assert await queue.cancel(c)
    assert settled == ["a", "c"]
    await _settle()
    rec.release("b")
    await _settle()
    assert settled == ["a", "c", "b"] and queue.jobs() == []
