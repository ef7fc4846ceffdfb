"""Multi-rank runs: small projects whose step calls a collective, run under torchrun (gloo on the
CPU, real processes). Steps and ranks are kept few: every rank imports torch."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from trnlens.jobs import ProfileRequest, run_profile
from trnlens.store import Store

# The last rank does several times the others' work, far above the scheduling noise of a busy
# machine (milliseconds of matmuls against a fraction of one).
IMBALANCED = """
import torch
import torch.distributed as dist


def make_inputs():
    last = dist.get_rank() == dist.get_world_size() - 1
    return torch.randn(192, 192), 48 if last else 1


# trnlens: inputs=make_inputs
def step(x, repeats):
    y = x
    for _ in range(repeats):
        y = torch.tanh(y @ x)
    dist.all_reduce(y)  # the collective
    return y
"""

FAST = {"backend": "cpu", "warmup": 1, "steps": 3, "repeats": 3}


def profile(
    root: Path, qualname: str, nproc: int, on_progress=None, compiled=False, steps=3, **options
) -> dict:
    variant = {"path": str(root / "ranks_step.py"), "qualname": qualname}
    if compiled:
        variant["compile"] = True
    request = ProfileRequest(
        variants=[variant],
        project_root=root, nproc_per_node=nproc, timeout_s=300,
        options={"timing_budget_s": 1.0, **options}, **{**FAST, "steps": steps},
    )  # fmt: skip
    store = Store(root)
    try:
        return asyncio.run(run_profile(request, store, on_progress=on_progress)).data
    finally:
        store.close()


def live_processes_naming(text: str) -> list[str]:
    """Live (not zombie) processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline}")
    return found
