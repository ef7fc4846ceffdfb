"""``within(awaitable, seconds)``: ``asyncio.wait_for`` without its lost cancel.

On Python 3.10 and 3.11 ``asyncio.wait_for`` returns the inner result, and swallows the caller's
cancel, when the inner work finishes in the same loop turn as the cancel arrives (CPython
gh-86296, fixed in 3.12 by building ``wait_for`` on ``asyncio.timeout``). A run's read loop
finishes a read with every progress message, so a user's cancel could be lost that way and the
run would go on. ``asyncio.timeout`` (3.11+) delivers the cancel; 3.10 has only ``wait_for``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(work: Awaitable[T], seconds: float | None) -> T:
    """Awaits ``work``; raises ``TimeoutError`` (``asyncio.TimeoutError``) after ``seconds``
    (None: no limit). A cancel of the caller always propagates."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await work
    return await asyncio.wait_for(work, seconds)  # pragma: no cover - Python 3.10
