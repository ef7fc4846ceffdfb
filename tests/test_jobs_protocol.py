"""The agent's answer enters the server typed (jobs.AgentProcess.request): progress as protocol
``Progress`` states, the answer as a ``Result`` or a ``ComparisonResult``, and a line that is
not a protocol message kept for the error report instead of being taken for one."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from trnlens.agent.protocol import SCHEMA_VERSION, Progress
from trnlens.jobs import AgentProcess
from trnlens.outcome import ComparisonResult, runs
from trnlens.results import Result
from trnlens.targets.local import LocalTarget

from tests.test_store import fake_result

# A stand-in agent (not the real one): hello, then for a request a stray line, a progress message
# with a bad phase, a good one, and the answer given on its command line.
STANDIN = """\
import json
import sys

answer = json.loads(sys.argv[1])
print(json.dumps({"type": "hello", "schema_version": VERSION}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if request["type"] == "profile":
        rid = request["id"]
        print("a library printing on the protocol's stream", flush=True)
        print(json.dumps({"type": "progress", "id": rid, "phase": "dancing"}), flush=True)
        print(json.dumps({"type": "progress", "id": rid, "phase": "measuring", "variant": 1,
                          "variants": 2, "step": 3, "steps": 5, "message": "profiled step 3 of 5"}),
              flush=True)
        print(json.dumps({"type": "result", "id": rid, "result": answer}), flush=True)
    elif request["type"] == "shutdown":
        break
""".replace("VERSION", str(SCHEMA_VERSION))


class StandInTarget(LocalTarget):
    def __init__(self, answer: dict) -> None:
        super().__init__()
        self.answer = answer

    def command(self) -> list[str]:
        return [sys.executable, "-c", STANDIN, json.dumps(self.answer)]


def ask(answer: dict) -> tuple[object, list[Progress], str]:
    async def scenario():
        agent = AgentProcess(StandInTarget(answer), idle_timeout_s=None)
        await agent.start()
        seen: list[Progress] = []
        try:
            outcome = await agent.request({"project_root": os.getcwd()}, on_progress=seen.append)
        finally:
            await agent.close()
        return outcome, seen, agent.stderr_tail()

    return asyncio.run(scenario())


def test_a_result_and_its_progress_arrive_typed():
    run = fake_result(7)
    outcome, seen, stderr = ask(run)
    assert isinstance(outcome, Result) and outcome.run_id == run["run_id"]
    assert [(p.phase, p.variant, p.variants, p.step, p.steps) for p in seen] == [
        ("measuring", 1, 2, 3, 5)
    ]
    assert "a library printing on the protocol's stream" in stderr
    assert "unknown phase 'dancing'" in stderr  # refused, and said where errors are read


def test_a_comparison_arrives_as_one_with_its_variants():
    variants = [fake_result(n) for n in (1, 2)]
    answer = {"schema_version": SCHEMA_VERSION, "variants": variants, "baseline": 0}
    outcome, _, _ = ask(answer)
    assert isinstance(outcome, ComparisonResult)
    assert [run.run_id for run in runs(outcome)] == [v["run_id"] for v in variants]
    assert outcome.comparison_id == variants[0]["run_id"]
