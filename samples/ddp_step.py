"""A DistributedDataParallel training step: DDP's reducer all-reduces the gradients in 2 buckets
while backward runs (launched from C++, not from a line of this file).

Profile it on 2 ranks with `trnlens profile --nproc-per-node 2 --backend cpu
samples/ddp_step.py::step`: the all-reduce is found at the `loss.backward()` line, with each
bucket's modules, its time, wait and exposed part on every rank (docs/ranks.md).
"""

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def make_inputs():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 8)
    )
    # 0.5 MB buckets: the last two layers fill one, the first layer another
    return DDP(model, bucket_cap_mb=0.5), torch.randn(32, 256)


# trnlens: inputs=make_inputs
def step(ddp, x):
    ddp.zero_grad()
    loss = ddp(x).sum()
    loss.backward()  # DDP's all-reduce
