"""Reading torchrun's failure summary (the text below is what torch 2.13's torchrun wrote when
rank 1 called os._exit(7) and rank 0 was then stopped)."""

from __future__ import annotations

from trnlens.agent.ranks import launch as ranks

SUMMARY = """
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
trnlens_agent.rankworker FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-04_06:09:06
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 14667)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 14667
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-04_06:09:06
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 7 (pid: 14668)
  error_file: <N/A>
============================================================
"""


def test_each_failed_ranks_exit_code_is_read(tmp_path):
    log = tmp_path / "torchrun.log"
    log.write_text(SUMMARY)
    assert ranks._exit_codes(str(log)) == {0: "-15", 1: "7"}
    assert ranks._exit_codes(str(tmp_path / "missing.log")) == {}


def test_the_rank_that_died_is_the_cause_not_the_one_torchrun_stopped(tmp_path):
    log = tmp_path / "torchrun.log"
    log.write_text(SUMMARY)
    error = ranks._failure({}, [0, 1], str(tmp_path), str(log), str(tmp_path), 1)
    assert error.kind == "environment"
    assert error.message.startswith("rank 1 ended without a result with exit code 7")
