"""DDP's buckets -> modules from the reducer's logged record agree with the reducer's own
GradBuckets (a real DDP on a one-rank gloo group in memory), and the path without a rebuild
(``find_unused_parameters=True``) reads the GradBuckets."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from trnlens.agent import attribution
from trnlens.agent.collectives import owners


@pytest.fixture
def one_rank():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def trained(**ddp_options) -> DDP:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256), nn.Linear(256, 8))
    ddp = DDP(model, bucket_cap_mb=0.5, **ddp_options)  # about 1 MB of gradients: 2 buckets
    x = torch.randn(8, 256)
    for _ in range(2):  # DDP rebuilds its buckets at the end of the first backward
        ddp.zero_grad()
        ddp(x).sum().backward()
    return ddp


def ground_truth(ddp: DDP, names: dict[int, str]) -> list[list[str]]:
    owner = {id(p): names[id(m)] for m in ddp.module.modules() for p in m.parameters(recurse=False)}
    out = []
    for bucket in ddp.reducer._get_zeros_like_grad_buckets():
        modules: list[str] = []
        for p in bucket.parameters():
            if owner[id(p)] not in modules:
                modules.append(owner[id(p)])
        out.append(modules)
    return out


@pytest.mark.parametrize("options", [{}, {"find_unused_parameters": True}])
def test_buckets_name_the_modules_the_reducer_holds(one_rank, options):
    ddp = trained(**options)
    reachable = attribution.reachable_modules(torch, [("ddp", ddp)])
    names = {id(m): name for name, m in reachable}
    (found,) = owners.ddp_buckets(torch, reachable)
    assert found["model"] == "ddp"
    assert len(found["buckets"]) > 1
    assert [b["modules"] for b in found["buckets"]] == ground_truth(ddp, names)
    assert sum(b["bytes"] for b in found["buckets"]) == 4 * sum(
        p.numel() for p in ddp.module.parameters()
    )


def test_no_ddp_no_buckets():
    reachable = attribution.reachable_modules(torch, [("model", nn.Linear(2, 2))])
    assert owners.ddp_buckets(torch, reachable) == []
