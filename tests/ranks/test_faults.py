"""Faults on one rank: a raise names the rank and its line, a rank stuck in a collective ends at
the timeout naming it, and a cancel stops every rank; no process is left in any case."""

from __future__ import annotations

import asyncio
import threading

import pytest
from trnlens.jobs import AgentFailure, ProfileRequest, run_profile
from trnlens.store import Store

from tests.agent.conftest import line_of
from tests.ranks.conftest import FAST, live_processes_naming, profile

RAISES = """
import torch
import torch.distributed as dist

CALLS = [0]


def step():
    CALLS[0] += 1
    x = torch.ones(8)
    if dist.get_rank() == 1 and CALLS[0] == 3:
        raise ValueError("rank one gives up")
    dist.all_reduce(x)
    return x
"""

HANGS = """
import threading

import torch
import torch.distributed as dist

CALLS = [0]


def step():
    CALLS[0] += 1
    x = torch.ones(8)
    if dist.get_rank() == 1 and CALLS[0] == 3:
        threading.Event().wait()  # stuck for good
    dist.all_reduce(x)
    return x
"""

SLOW = """
import time

import torch
import torch.distributed as dist


def step():
    x = torch.ones(8)
    time.sleep(0.2)
    dist.all_reduce(x)
    return x
"""


def test_a_rank_that_raises_is_named_with_its_line_and_the_others_are_stopped(make_project):
    root = make_project({"ranks_step.py": RAISES, "pyproject.toml": ""})
    result = profile(root, "step", 2)  # a failed run is a result, as in one process
    assert result["world_size"] == 2
    error = result["error"]
    assert error["rank"] == 1 and error["kind"] == "user_code"
    assert "rank 1: ValueError: rank one gives up" in error["message"]
    assert (error["path"], error["line"]) == (
        "ranks_step.py",
        line_of(root, "ranks_step.py", "raise ValueError"),
    )
    assert live_processes_naming(str(root)) == []


def test_a_rank_stuck_in_a_collective_ends_at_the_timeout_naming_rank_and_collective(
    make_project,
):
    root = make_project({"ranks_step.py": HANGS, "pyproject.toml": ""})
    error = profile(root, "step", 2, collective_timeout_s=3)["error"]
    reduce_line = line_of(root, "ranks_step.py", "dist.all_reduce(x)")
    assert error["rank"] == 0
    assert error["collective"]["name"] == "all_reduce"
    assert error["collective"]["line"] == reduce_line
    assert f"rank 0 was in all_reduce at ranks_step.py:{reduce_line}" in error["message"]
    stuck = line_of(root, "ranks_step.py", "threading.Event().wait()")
    assert f"rank 1 was at ranks_step.py:{stuck} when it was stopped" in error["message"]
    assert live_processes_naming(str(root)) == []


def test_a_cancel_stops_every_rank(make_project):
    root = make_project({"ranks_step.py": SLOW, "pyproject.toml": ""})
    measuring = threading.Event()

    def on_progress(message):
        if "rank 0" in message.message and message.phase == "warm-up":
            measuring.set()

    async def scenario():
        request = ProfileRequest(
            variants=[{"path": str(root / "ranks_step.py"), "qualname": "step"}],
            project_root=root, nproc_per_node=2, timeout_s=300,
            **{**FAST, "warmup": 50},
        )  # fmt: skip
        store = Store(root)
        try:
            task = asyncio.create_task(run_profile(request, store, on_progress=on_progress))
            while not measuring.is_set():  # the ranks are running the user's steps
                await asyncio.wait([task], timeout=0.1)
                assert not task.done(), task.result()
            task.cancel()
            with pytest.raises((asyncio.CancelledError, AgentFailure)):
                await task
        finally:
            store.close()

    asyncio.run(scenario())
    assert live_processes_naming(str(root)) == []


DIES = """
import os

import torch
import torch.distributed as dist


def step():
    x = torch.ones(8)
    if dist.get_rank() == 1:
        os._exit(7)  # gone without a word (a crash in C looks the same from outside)
    dist.all_reduce(x)
    return x
"""


def test_a_rank_that_dies_without_an_error_is_reported_with_torchruns_log(make_project):
    root = make_project({"ranks_step.py": DIES, "pyproject.toml": ""})
    with pytest.raises(AgentFailure) as caught:
        profile(root, "step", 2)
    error = caught.value.error
    assert error["kind"] == "environment"
    assert error["message"].startswith("rank 1 ended without a result with exit code 7")
    assert "exitcode" in error["message"]  # torchrun's own account of the failure, quoted
    assert live_processes_naming(str(root)) == []
