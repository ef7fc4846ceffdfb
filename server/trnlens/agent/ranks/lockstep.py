"""One rank's process group, and the lockstep that keeps ranks measuring the same steps.

The process group is initialised before the user's inputs factory, so factories and functions
may call ``dist.get_rank()``: gloo on the CPU, nccl on CUDA, and on Neuron the backend that
torch-neuronx registers (feature-detected; untested here, no Trainium host is reachable).

Every decision a pass takes on its own (a step settled, the timing budget spent) would let ranks
run different numbers of steps, and a step with a collective in it would then hang. The lockstep
agrees each decision across ranks (a one-int all_reduce on a gloo group of our own, outside the
measured calls) and puts a barrier between phases.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import time

from .. import errors

NEURON_BACKENDS = ("neuron", "xla")  # names torch-neuronx may register: feature-detected


def choose_backend(torch, backend_name: str) -> str:
    dist = torch.distributed
    if backend_name == "cpu":
        return "gloo"
    if backend_name == "cuda" or (backend_name == "auto" and torch.cuda.is_available()):
        return "nccl"
    if backend_name in ("neuron", "auto"):
        try:  # its process-group backend registers on import (before the runner's own import)
            import torch_neuronx  # noqa: F401
        except Exception:  # absent, or the public index's placeholder that raises on import
            pass
        for name in NEURON_BACKENDS:
            try:
                if dist.is_backend_available(name):
                    return name
            except Exception:  # an older torch without is_backend_available
                pass
        if backend_name == "neuron":
            raise errors.environment(
                "no Neuron process-group backend is registered in this torch (looked for "
                f"{', '.join(NEURON_BACKENDS)}; multi-rank Neuron runs are untested here)"
            )
    return "gloo"


class Lockstep:
    """What a rank agrees with the others: decisions, phase barriers, clock offsets."""

    def __init__(self, torch, group, dist_backend: str, timeout_s: float):
        self.torch = torch
        self.dist = torch.distributed
        self.group = group  # gloo: CPU tensors, whatever the main backend
        self.dist_backend = dist_backend
        self.timeout_s = timeout_s
        self.rank = self.dist.get_rank()
        self.world_size = self.dist.get_world_size()
        self.phases: list[str] = []

    @classmethod
    def start(cls, torch, backend_name: str, timeout_s: float) -> Lockstep:
        dist = torch.distributed
        if not dist.is_available():
            raise errors.environment("this torch was built without torch.distributed")
        dist_backend = choose_backend(torch, backend_name)
        timeout = dt.timedelta(seconds=timeout_s)
        if dist_backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(dist_backend, timeout=timeout)
        group = None if dist_backend == "gloo" else dist.new_group(backend="gloo", timeout=timeout)
        return cls(torch, group, dist_backend, timeout_s)

    def _reduce(self, value: int, op) -> int:
        tensor = self.torch.tensor([value], dtype=self.torch.int64)
        _original(self.dist, "all_reduce")(tensor, op=op, group=self.group)
        return int(tensor.item())

    def all(self, flag: bool) -> bool:
        return bool(self._reduce(int(flag), self.dist.ReduceOp.MIN))

    def any(self, flag: bool) -> bool:
        return bool(self._reduce(int(flag), self.dist.ReduceOp.MAX))

    def phase(self, name: str) -> None:
        self.phases.append(name)
        _original(self.dist, "barrier")(group=self.group)

    def clock(self, rounds: int = 5) -> dict:
        """This rank's wall clock against rank 0's, read at the exit of ``rounds`` barriers:
        offset = (mine - rank 0's) at the same barrier, the smallest in magnitude kept (the
        barrier's exit skew only adds to it); ``spread_us`` is how far the rounds disagree."""
        samples = []
        for _ in range(rounds):
            _original(self.dist, "barrier")(group=self.group)
            now = time.time_ns() / 1000
            gathered: list[float] = [0.0] * self.world_size  # every slot filled by the gather
            _original(self.dist, "all_gather_object")(gathered, now, group=self.group)
            samples.append(now - gathered[0])
        best = min(samples, key=abs)
        return {
            "host": socket.gethostname(),
            "offset_us": best,
            "spread_us": max(samples) - min(samples),
        }

    def gather(self, obj) -> list | None:
        """``obj`` of every rank, in rank order, on rank 0 (None elsewhere)."""
        out: list | None = [None] * self.world_size if self.rank == 0 else None
        _original(self.dist, "gather_object")(obj, out, dst=0, group=self.group)
        return out

    def close(self) -> None:
        try:
            self.dist.destroy_process_group()
        except Exception:  # already torn down by a failing peer: nothing left to free
            pass


def _original(dist, name: str):
    from ..collectives import wrapper

    return wrapper.originals.get(name) or getattr(dist, name)
