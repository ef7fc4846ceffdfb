"""FSDP2 (``fully_shard``) on 2 ranks with gloo on the CPU. torch 2.13's gloo runs both of its
collectives (FSDP2 calls them as ``all_gather_single`` and ``reduce_scatter_single``; gloo runs
the reduce-scatter as an all-reduce, its work event says ``gloo:all_reduce``): each all-gather
and reduce-scatter is found with the sharded module it moved, at the line that caused it."""

from __future__ import annotations

import json

from tests.agent.conftest import line_of
from tests.ranks.conftest import profile

FSDP_STEP = """
import torch
from torch import nn
from torch.distributed.fsdp import fully_shard


def make_inputs():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8))
    fully_shard(model[0])
    fully_shard(model[2])
    fully_shard(model)
    return model, torch.randn(16, 64)


# trnlens: inputs=make_inputs
def step(model, x):
    loss = model(x).sum()  # forward: all-gathers
    loss.backward()  # backward: all-gathers again, then reduce-scatters
"""


def test_fsdp2_all_gather_and_reduce_scatter_name_their_sharded_modules(make_project):
    root = make_project({"ranks_step.py": FSDP_STEP, "pyproject.toml": ""})
    result = profile(root, "step", 2, lines=False)
    seen = json.dumps(result.get("collectives"), indent=1)
    assert result["error"] is None and result["world_size"] == 2, seen
    forward = line_of(root, "ranks_step.py", "loss = model(x)")
    backward = line_of(root, "ranks_step.py", "loss.backward()")
    rows = {(r["name"], r["line"]): r for r in result["collectives"]}
    gather = rows[("all_gather_single", forward)]
    assert gather["source"] == "fsdp" and gather["modules"] == ["model.0", "model.2"], seen
    assert gather["calls_per_step"] == 2
    # backward gathers the parameters again and reduce-scatters their gradients
    assert set(rows[("all_gather_single", backward)]["modules"]) <= {"model.0", "model.2"}
    scatter = rows[("reduce_scatter_single", backward)]
    assert scatter["modules"] == ["model.2", "model.0"], seen  # in backward's order
    # the gathered parameters: model.0 is 64x128+128 floats, model.2 128x8+8
    assert gather["bytes_per_step"] == 4 * (64 * 128 + 128 + 128 * 8 + 8)
    for row in (gather, scatter):
        assert all(p["time_per_step_us"] > 0 for p in row["per_rank"]), seen
