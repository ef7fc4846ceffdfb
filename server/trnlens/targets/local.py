"""The local target: the agent runs as a subprocess of this machine's Python."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
from dataclasses import dataclass, field

from trnlens.outcome import Outcome
from trnlens.targets import bundle
from trnlens.targets.base import Staged, TargetError


@dataclass
class LocalTarget:
    name: str = "local"
    python: str | None = None  # the user's interpreter (with torch); default: this one
    env: dict[str, str] = field(default_factory=dict, repr=False)  # may hold secrets
    nproc_per_node: int | None = None  # ranks per run under torchrun (docs/ranks.md)
    address: str | None = None  # where other hosts reach this one (a multi-host run's first host)

    def interpreter(self) -> str:
        python = self.python or sys.executable
        found = shutil.which(python) if not os.path.isabs(python) else python
        if not found or not os.path.exists(found):
            raise FileNotFoundError(f"interpreter not found: {python}")
        return found

    def command(self) -> list[str]:
        # Not -I: the user's PYTHONPATH and user site-packages may hold their torch and code.
        return [self.interpreter(), str(bundle.build())]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def describe(self) -> str:
        return "local"

    def secrets(self) -> list[str]:
        return list(self.env.values())

    async def prepare(self) -> None:
        return None

    async def stage(self, payload: dict, store) -> Staged:
        return Staged(payload)

    async def collect(self, staged: Staged, outcome: Outcome, store, fetch=None) -> None:
        return None

    async def discard(self, staged: Staged) -> None:
        return None

    async def probe(self) -> dict:
        """What this interpreter has (python, torch, torch_neuronx, devices): agent --probe."""
        proc = await asyncio.create_subprocess_exec(
            *self.command(), "--probe", stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self.environment(),
        )  # fmt: skip
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise FileNotFoundError(err.decode("utf-8", "replace").strip() or "probe failed")
        return json.loads(out)

    async def kill(self) -> None:
        return None  # the local agent's process group is killed by the job itself

    def reach(self) -> str:
        """The address other hosts reach this machine at (several hosts: the rendezvous)."""
        if not self.address:
            raise TargetError(
                f"target {self.name!r} is a local host in a multi-host run: set its `address` "
                "to where the other hosts reach this machine"
            )
        return self.address

    async def free_port(self) -> int:
        """A TCP port free here now (the first host's rendezvous port)."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("", 0))
            return sock.getsockname()[1]
