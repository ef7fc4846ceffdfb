"""A cancel the agent answers by leaving (it stopped an import): the next run must not write to
the pipe of a process that is already gone."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import time

from trnlens.agent.protocol import SCHEMA_VERSION
from trnlens.jobs import AgentFailure, AgentProcess
from trnlens.targets.local import LocalTarget

# A stand-in agent speaking the protocol: it answers a cancel with `exiting` and leaves at once,
# as the real one does after a cancel that stopped `import torch` (agent/main.py).
LEAVES_ON_CANCEL = textwrap.dedent(f"""
    import json, os, sys
    print(json.dumps({{"type": "hello", "schema_version": {SCHEMA_VERSION}, "pid": os.getpid()}}),
          flush=True)
    current = None
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "profile":
            current = message["id"]
            print(json.dumps({{"type": "progress", "id": current, "phase": "importing"}}),
                  flush=True)
        elif message["type"] == "cancel":
            error = {{"kind": "cancelled", "message": "cancelled", "exiting": True}}
            print(json.dumps({{"type": "error", "id": current, "error": error}}), flush=True)
            os._exit(0)
""")


class StandInTarget(LocalTarget):
    def __init__(self, script: str) -> None:
        super().__init__()
        self.script = script

    def command(self) -> list[str]:
        return [sys.executable, "-c", self.script]


def test_a_cancel_answered_by_leaving_waits_for_the_agent_to_be_gone():
    async def scenario() -> None:
        agent = AgentProcess(StandInTarget(LEAVES_ON_CANCEL))
        await agent.start()
        seen = asyncio.Event()
        run = asyncio.create_task(
            agent.request({"project_root": os.getcwd()}, on_progress=lambda m: seen.set())
        )
        await asyncio.wait_for(seen.wait(), 30)
        run.cancel()
        try:
            await run
        except (asyncio.CancelledError, AgentFailure):
            pass
        assert not agent.alive()  # reaped: the next run starts a fresh one
        await agent.close()

    asyncio.run(scenario())


LEAVES_AFTER_HELLO = textwrap.dedent(f"""
    import json, os
    print(json.dumps({{"type": "hello", "schema_version": {SCHEMA_VERSION}, "pid": os.getpid()}}),
          flush=True)
    os._exit(0)
""")


def _exited(pid: int) -> bool:
    """The process has exited: reaped already, or a zombie nobody has reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_request_to_an_agent_that_has_left_is_a_crash_worth_a_retry():
    """Whether the request meets the closed pipe or the end of the agent's output, the run gets
    an AgentFailure that asks for one more try on a fresh process, never a bare
    ConnectionResetError."""

    async def scenario() -> AgentFailure:
        agent = AgentProcess(StandInTarget(LEAVES_AFTER_HELLO))
        await agent.start()
        assert agent.proc is not None
        deadline = time.monotonic() + 30
        while not _exited(agent.proc.pid):  # gone, whether or not it was reaped yet
            assert time.monotonic() < deadline, "the stand-in agent did not leave"
            await asyncio.sleep(0.01)
        try:
            await agent.request({"project_root": os.getcwd()})
        except AgentFailure as failure:
            return failure
        finally:
            await agent.close()
        raise AssertionError("the request succeeded")

    failure = asyncio.run(scenario())
    assert failure.error.get("retry") is True
