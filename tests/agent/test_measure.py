"""The measuring passes start only once the steps have settled, and say when they never do."""

from __future__ import annotations

import torch
from trnlens.agent.settling import SettlingSchedule

from tests.agent.conftest import run

Action = torch.profiler.ProfilerAction

# 64 MB a call, above glibc's largest dynamic mmap threshold (32 MB): always a fresh mapping,
# faulted in page by page, whatever earlier in-process runs left free on the heap (1 MB kept
# per call came partly from their freed, already faulted memory: 141 faults a step, not 256).
GROWS = """
import torch


# trnlens: inputs=inputs
def grows(x):
    fresh = torch.ones(1 << 24)  # 64 MB of fresh memory every call
    return x + fresh[0]


def inputs():
    return (torch.ones(4),)
"""


def test_the_schedule_warms_up_until_told_then_records_the_active_steps():
    schedule = SettlingSchedule(Action, active=3)
    assert [schedule(n) for n in range(4)] == [Action.WARMUP] * 4
    assert not schedule.recording
    schedule.record_from(4)
    assert schedule.recording
    assert [schedule(n) for n in range(3, 9)] == [
        Action.WARMUP, Action.RECORD, Action.RECORD, Action.RECORD_AND_SAVE, Action.NONE,
        Action.NONE,
    ]  # fmt: skip


def test_a_single_active_step_is_recorded_and_saved_at_once():
    schedule = SettlingSchedule(Action, active=1)
    schedule.record_from(1)
    assert [schedule(n) for n in range(3)] == [Action.WARMUP, Action.RECORD_AND_SAVE, Action.NONE]


def test_code_that_maps_fresh_memory_every_step_never_settles_and_the_result_says_so(
    make_project,
):
    root = make_project({"grows.py": GROWS})
    outcome = run(root, [{"path": "grows.py", "qualname": "grows"}], warmup=1, steps=3, repeats=5)
    assert outcome["error"] is None, outcome["error"]
    assert outcome["profiled_timing"]["page_faults"] >= 256  # at least 1 MB of 4 KB pages a step
    assert outcome["timing"]["page_faults"] >= 256
    assert outcome["stability"]["page_faults_per_step"] >= 256
    assert any(w.startswith("every step faults in fresh memory") for w in outcome["warnings"])
