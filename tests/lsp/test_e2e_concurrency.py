"""Concurrency end to end (issue 13): runs on two targets at once (one lane per target), a
settings change while a run waits, and a cancel at every phase of a run.
"""

from __future__ import annotations

import asyncio

from lsprotocol import types
from trnlens.store import Store

from .session import FAST, editor, workspace

CRAWL = """\
import time

import torch

time.sleep(0.5)  # importing takes a moment


def crawl_inputs():
    time.sleep(0.5)  # so does building the inputs
    return (torch.ones(8),)


# trnlens: inputs=crawl_inputs
def crawl(x):
    time.sleep(0.4)  # and every call
    return x + 1
"""
TWO_TARGETS = {**FAST, "targets": {"cpu2": {"kind": "local"}}}


async def test_two_targets_run_side_by_side_and_a_queued_run_takes_new_settings(tmp_path):
    root = workspace(tmp_path)
    async with editor(root, dict(TWO_TARGETS)) as ed:
        uri = ed.open()
        lenses = await ed.lenses(uri)
        sleepy = await ed.click(lenses["sleepy"])
        waiting = await ed.click(lenses["rmsnorm_fused"])
        assert waiting["state"] == "queued" and waiting["target"] == "local"
        other = await ed.command(
            "trnlens.server.profile", {"uri": uri, "qualname": "rmsnorm_naive", "target": "cpu2"}
        )
        assert other["state"] == "running" and other["target"] == "cpu2"  # its own lane
        end = await ed.wait_for_end(other["token"])
        assert end.message.startswith("rmsnorm_naive: ")
        assert not isinstance(ed.progress(sleepy["token"])[-1], types.WorkDoneProgressEnd)

        # While rmsnorm_fused waits, the user changes the number of profiled steps.
        ed.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"trnlens": {**TWO_TARGETS, "steps": 3}})
        )
        ed.client.window_work_done_progress_cancel(
            types.WorkDoneProgressCancelParams(token=sleepy["token"])
        )
        assert (await ed.wait_for_end(sleepy["token"], 30)).message == "cancelled"
        end = await ed.wait_for_end(waiting["token"])
        assert end.message.startswith("rmsnorm_fused: ")
    with Store(root) as store:
        fused = store.latest("model.py", "rmsnorm_fused")
        naive = store.latest("model.py", "rmsnorm_naive")
    assert fused["steps"] == 3  # the settings of when it ran, not of when it was queued
    assert naive["target"] == "cpu2" and naive["steps"] == FAST["steps"]


PHASES = ("starting the agent", "importing", "building-inputs", "warm-up", "measuring", "timing")


async def test_cancel_at_every_phase_then_a_clean_run(tmp_path):
    root = workspace(tmp_path)
    (root / "crawl.py").write_text(CRAWL)
    outcomes = {}
    async with editor(root) as ed:
        uri = ed.open("crawl.py")
        for phase in PHASES:
            answer = await ed.click((await ed.lenses(uri))["crawl"])
            token = answer["token"]
            await ed.wait_for(
                lambda token=token, phase=phase: any(
                    (getattr(r, "message", None) or "").startswith(phase)
                    or isinstance(r, types.WorkDoneProgressEnd)
                    for r in ed.progress(token)
                ),
                timeout=120,
                what=f"phase {phase}",
            )
            ed.client.window_work_done_progress_cancel(
                types.WorkDoneProgressCancelParams(token=token)
            )
            end = await ed.wait_for_end(token, 60)
            outcomes[phase] = end.message
            # cancelled, or (when the phase was its last moments) done: never an error or a hang
            assert end.message == "cancelled" or end.message.startswith("crawl: "), end.message
            await asyncio.wait_for(ed.hover(uri, 14), 10)  # the server answers throughout
        answer = await ed.click((await ed.lenses(uri))["crawl"])
        end = await ed.wait_for_end(answer["token"])
        assert end.message.startswith("crawl: ") and "dispatch" in end.message
    assert list(outcomes.values()).count("cancelled") >= len(PHASES) - 1, outcomes


CRASH = """\
import ctypes

import torch


def crashes(x=torch.ones(4)):
    return ctypes.string_at(0)  # line 7


def fine(x=torch.ones(4)):
    return x * 2
"""


async def test_a_crashing_agent_leaves_the_server_up_and_is_replaced(tmp_path):
    root = workspace(tmp_path)
    (root / "crash.py").write_text(CRASH)
    async with editor(root) as ed:
        uri = ed.open("crash.py")
        _, end = await ed.profile(uri, "crashes")
        assert "SIGSEGV" in end.message and "crash.py:7" in end.message, end.message
        await asyncio.wait_for(ed.hover(uri, 6), 10)
        _, end = await ed.profile(uri, "fine")  # on a fresh agent
        assert end.message.startswith("fine: "), end.message
