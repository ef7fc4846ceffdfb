"""DistributedDataParallel on 2 ranks (gloo, CPU): the reducer's bucketed all-reduce, launched
from C++ during backward, is read from the profiler's own events and found at the
``backward()`` line, with a time on each rank, its bytes, and the modules its buckets hold."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from trnlens.results import schema

from tests.agent.conftest import line_of
from tests.ranks.conftest import profile

# the sample users are pointed to (samples/ddp_step.py), run as the project's ranks_step.py
DDP_STEP = (Path(__file__).resolve().parents[2] / "samples" / "ddp_step.py").read_text()


def test_ddp_all_reduce_is_found_at_the_backward_line_with_its_buckets_modules(make_project):
    root = make_project({"ranks_step.py": DDP_STEP, "pyproject.toml": ""})
    result = profile(root, "step", 2, lines=False)
    seen = json.dumps([result.get("ranks"), result.get("collectives")], indent=1)
    assert result["error"] is None and result["world_size"] == 2, seen
    jsonschema.Draft202012Validator(schema()).validate(result)  # the documented fields

    (row,) = result["collectives"]
    assert row["name"] == "all_reduce" and row["source"] == "ddp", seen
    assert (row["path"], row["line"]) == (
        "ranks_step.py",
        line_of(root, "ranks_step.py", "loss.backward()  #"),
    )
    assert row["calls_per_step"] == 2  # two buckets
    # bucket 0 (launched first) holds the last layers' gradients, bucket 1 the first layer's
    assert [b["modules"] for b in row["buckets"]] == [["ddp.module.4", "ddp.module.2"],
                                                       ["ddp.module.0"]]  # fmt: skip
    assert [b["bytes"] for b in row["buckets"]] == [4 * (8 * 256 + 8 + 256 * 512 + 256),
                                                    4 * (512 * 256 + 512)]  # fmt: skip
    assert row["modules"] == ["ddp.module.4", "ddp.module.2", "ddp.module.0"]
    assert row["bytes_per_step"] == sum(b["bytes"] for b in row["buckets"])
    for per_rank in row["per_rank"]:
        assert per_rank["time_per_step_us"] > 0, seen
        assert 0 <= per_rank["exposed_per_step_us"] <= per_rank["time_per_step_us"], seen
        assert per_rank["bandwidth_gbps"] > 0, seen
    for rank in result["ranks"]:
        assert rank["collective_time_per_step_us"] > 0, seen
        assert rank["collective_time_per_step_us"] <= rank["wall_time_per_step_us"], seen
        assert rank["collective_bytes_per_step"] == row["bytes_per_step"]
    # every call on the one time axis, with its exposed parts inside it
    for timeline in result["rank_timelines"]:
        calls = timeline["collectives"]
        assert len(calls) == 2 * len(timeline["steps"])
        for call in calls:
            end = call["start_us"] + call["dur_us"]
            assert all(call["start_us"] <= a <= b <= end for a, b in call["exposed"])
