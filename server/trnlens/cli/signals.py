"""SIGTERM and SIGHUP end a CLI run the way Ctrl-C does: the agent is cancelled, then killed.

The agent runs in a process group of its own (so that a terminal's Ctrl-C reaches only us and we
relay it), which also means that what ``timeout``, a CI cancel or a closed terminal sends to the
CLI never reaches the agent. Python's default for these signals ends the CLI at once, without
the ``finally`` blocks that stop the agent: an agent stuck in user code then runs on, orphaned.
Here the signal cancels the run's task instead, so the cancel path (ask the agent, kill its group
after the grace period) runs before the CLI exits with 128 + the signal's number.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
FORWARDED = (signal.SIGTERM, signal.SIGHUP)


class Terminated(Exception):
    """The run was stopped by a signal (after its agent was stopped)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def run(work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(work)``, with SIGTERM and SIGHUP cancelling ``work`` (raises Terminated)."""
    return asyncio.run(_cancel_on_signal(work))


async def _cancel_on_signal(work: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    received: list[int] = []

    def stop(signum: int) -> None:
        if not received:
            received.append(signum)
            task.cancel()

    for signum in FORWARDED:
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await work
    except asyncio.CancelledError:
        if received:
            raise Terminated(received[0]) from None
        raise
    finally:
        for signum in FORWARDED:
            loop.remove_signal_handler(signum)
