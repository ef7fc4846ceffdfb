"""Which failure a multi-host run reports, over agents that answer as hosts do: the host whose
rank raised, not the one whose ranks lost their peer and answered first; the others stopped."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from trnlens import multihost
from trnlens.jobs import AgentFailure
from trnlens.outcome import Result


class FakeAgent:
    def __init__(self, name: str, answer, after_s: float):
        self.target = SimpleNamespace(name=name)
        self.answer, self.after_s = answer, after_s
        self.cancelled = False

    async def request(self, payload, on_progress=None):
        try:
            await asyncio.sleep(self.after_s)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def failed_result(error: dict) -> Result:
    return Result({"run_id": "r", "error": error, "warnings": []})


def lost(rank: int) -> AgentFailure:
    return AgentFailure({"kind": "environment", "message": f"rank {rank}: peer gone",
                         "rank": rank, "lost_peer": True})  # fmt: skip


def answers(agents):
    return asyncio.run(multihost._answers(agents, [{} for _ in agents], None))


def test_the_host_whose_rank_raised_is_the_cause_though_it_answered_second():
    raised = failed_result({"kind": "user_code", "message": "rank 3: ValueError: no",
                            "rank": 3, "path": "s.py", "line": 9})  # fmt: skip
    agents = [FakeAgent("a", lost(0), 0.0), FakeAgent("b", raised, 0.05)]
    with pytest.raises(multihost._Failed) as caught:
        answers(agents)
    error = caught.value.failure.error
    assert error["host"] == "b" and error["rank"] == 3
    assert error["message"] == "on b: rank 3: ValueError: no"
    assert caught.value.answer is raised  # a rank's own error comes back as the run


def test_a_cause_stops_the_other_hosts_at_once():
    raised = AgentFailure({"kind": "environment", "message": "torchrun: no such interface"})
    agents = [FakeAgent("a", raised, 0.0), FakeAgent("b", Result({}), 60)]
    with pytest.raises(multihost._Failed) as caught:
        answers(agents)
    assert caught.value.failure.error["host"] == "a" and caught.value.answer is None
    assert agents[1].cancelled


def test_only_lost_peers_name_the_first_host():
    agents = [FakeAgent("a", lost(0), 0.02), FakeAgent("b", lost(2), 0.0)]
    with pytest.raises(multihost._Failed) as caught:
        answers(agents)
    assert caught.value.failure.error["host"] == "a"
