"""GPU check of collective reading on nccl (issue 32), one process: a DDP step on ``cuda:0``
under a one-rank nccl group, profiled with CPU and CUDA activities, read by the agent's
collectives code as a rank's would be. Prints the events the reading relies on (``c10d::*``
launches, ``record_param_comms``, nccl kernels), the calls found (line, bucket, modules, bytes,
time, exposed part) and HTA's kernel overlap (overlap.py). One rank only: a machine with one GPU
cannot hold two nccl ranks (nccl refuses two ranks on one device).

Run: PYTHONPATH=server python3 bench/gpu_collectives_check.py (on a GPU machine with this tree: the
session that added it could only send its lead's checkout there, so it ran an inline probe of the
same events instead; docs/ranks.md says what it saw).
"""

from __future__ import annotations

import collections
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "server"))
from trnlens.agent import attribution, overlap  # noqa: E402
from trnlens.agent import events as ev  # noqa: E402
from trnlens.agent.collectives import calls, owners, wrapper  # noqa: E402


def main() -> None:
    print("torch", torch.__version__, "cuda", torch.cuda.is_available())
    store = dist.HashStore()
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device(0))
    here = os.path.abspath(__file__)
    wrapper.install(torch, lambda f: os.path.abspath(f) == here, lambda f: "gpu_check.py")
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 8)
    ).cuda()
    ddp = DDP(model, bucket_cap_mb=8)
    x = torch.randn(256, 1024, device="cuda")

    def step():
        ddp.zero_grad()
        loss = ddp(x).sum()
        loss.backward()
        dist.all_reduce(loss.detach())  # a Python call too

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    # a schedule, as the agent's passes have: without one no ProfilerStep ranges are recorded
    # and the reading finds no steps to put the calls in (the first H200 run: "steps: 0")
    plan = torch.profiler.schedule(wait=0, warmup=0, active=3)
    with torch.profiler.profile(
        activities=acts, record_shapes=False, schedule=plan, acc_events=True
    ) as prof:
        for _ in range(3):
            step()
            torch.cuda.synchronize()
            prof.step()
    events = list(prof.events())
    names = collections.Counter(
        e.name for e in events
        if "c10d" in e.name or "nccl" in e.name.lower() or "record_param_comms" in e.name
    )  # fmt: skip
    print("events the reading relies on:")
    for name, count in names.most_common(20):
        print(f"  {count:3d}  {name[:110]}")
    reach = attribution.reachable_modules(torch, [("ddp", ddp)])
    buckets = owners.ddp_buckets(torch, reach)
    print(
        "buckets:", [(b["index"], b["bytes"], b["modules"]) for d in buckets for b in d["buckets"]]
    )
    got = calls.timeline(events, None, ev.is_host, ddp=buckets)
    print("steps:", len(got["steps"]), "calls:", len(got["collectives"]))
    for c in got["collectives"]:
        exposed = sum(b - a for a, b in c["exposed"])
        print(f"  step {c['step']} {c['name']:12s} {c['source']:6s} line {c.get('line')} "
              f"bucket {c.get('bucket')} bytes {c.get('bytes')} dur {c['dur_us']:.1f} µs "
              f"exposed {exposed:.1f} µs modules {c.get('modules')}")  # fmt: skip
    kernels = [(e.name, e.time_range.start, e.time_range.end) for e in events if not ev.is_host(e)]
    print("kernel overlap:", overlap.figures(kernels, len(got["steps"])))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
