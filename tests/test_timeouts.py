"""within(): a deadline that never swallows the caller's cancel (asyncio.wait_for on 3.10/3.11
does when the inner work finishes in the same loop turn: CPython gh-86296)."""

import asyncio
import sys

import pytest
from trnlens.timeouts import within


async def _cancelled_as_it_finishes(waiter) -> asyncio.Task:
    """A task awaiting ``waiter(future)`` whose future gets its result in the same loop turn
    as the task's cancel: the read that completes just as the user clicks ■ cancel."""
    future = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(waiter(future, 30))
    await asyncio.sleep(0)  # the task now waits on the future
    future.set_result("a message")
    task.cancel()
    return task


async def test_a_cancel_as_the_work_finishes_still_cancels():
    task = await _cancelled_as_it_finishes(within)
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="wait_for keeps the cancel since 3.12")
async def test_wait_for_is_what_loses_that_cancel_here():
    # The race the helper exists for, shown on this Python: wait_for returns the result.
    task = await _cancelled_as_it_finishes(asyncio.wait_for)
    assert await task == "a message"


async def test_the_deadline_and_the_result():
    assert await within(asyncio.sleep(0, "done"), 5) == "done"
    assert await within(asyncio.sleep(0, "no limit"), None) == "no limit"
    with pytest.raises(asyncio.TimeoutError):
        await within(asyncio.sleep(30), 0.05)
