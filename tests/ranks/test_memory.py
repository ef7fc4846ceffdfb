"""Memory on several ranks (issue 41, point 8): each rank's peak from its own memory pass, and
the rank that runs out first named, on 2 real ranks (gloo, CPU) whose sizes are known in
advance: rank r's input is (1 + 3r) MiB and its step makes a temporary as large."""

from __future__ import annotations

import json

import jsonschema
from trnlens import rankfigures
from trnlens.results import schema

from tests.ranks.conftest import profile

MIB = 1 << 20

UNEVEN = """
import torch
import torch.distributed as dist


def make_inputs():
    floats = MIB // 4 * (1 + 3 * dist.get_rank())
    return (torch.ones(floats),)


# trnlens: inputs=make_inputs
def step(x):
    doubled = x * 2  # a temporary as large as the input
    total = doubled.sum().reshape(1)
    dist.all_reduce(total)  # the same size on every rank
    return total
""".replace("MIB", str(MIB))


def test_each_rank_has_its_peak_and_the_rank_nearest_its_limit_is_named(make_project):
    root = make_project({"ranks_step.py": UNEVEN, "pyproject.toml": ""})
    result = profile(root, "step", 2, lines=False)
    rows = {row["rank"]: row for row in result.get("ranks") or []}
    seen = json.dumps([rows, result.get("memory_nearest_limit")], indent=1)
    assert result["error"] is None and set(rows) == {0, 1}, seen
    jsonschema.Draft202012Validator(schema()).validate(result)
    # the input and the temporary: 2 MiB on rank 0 and 8 MiB on rank 1, and a few bytes of
    # small tensors on both (the sum, the all-reduced total; gloo now and then still holds the
    # step before's 4-byte total at the peak)
    assert abs(rows[1]["peak_memory_bytes"] - rows[0]["peak_memory_bytes"] - 6 * MIB) <= 64, seen
    assert 2 * MIB <= rows[0]["peak_memory_bytes"] < 2 * MIB + 4096, seen
    assert all(row["memory_limit_bytes"] > 8 * MIB for row in rows.values()), seen
    # gloo's late release of a 4-byte total is under the growth floor: no rank grows
    assert all(row["memory_growth_per_step_bytes"] == 0 for row in rows.values()), seen

    nearest = result["memory_nearest_limit"]
    assert (nearest["rank"], nearest["peak_bytes"]) == (1, rows[1]["peak_memory_bytes"]), seen
    assert nearest["others_median_bytes"] == rows[0]["peak_memory_bytes"]
    assert nearest["share_of_limit"] == rows[1]["peak_memory_bytes"] / nearest["limit_bytes"]
    # the memory figures above the ranks are rank 0's, and say so
    assert result["memory"]["rank"] == 0
    assert sum(result["memory"]["at_peak"].values()) == rows[0]["peak_memory_bytes"], seen
    assert 1 * MIB in result["memory"]["at_peak"].values(), json.dumps(result["memory"])
    words = rankfigures.nearest_limit_words(result)
    assert words is not None and words.startswith("rank 1 nearest its memory limit: peak 8.")
