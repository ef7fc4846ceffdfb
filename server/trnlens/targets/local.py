"""The local target: the agent runs as a subprocess of this machine's Python."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field

from trnlens.targets import bundle
from trnlens.targets.base import Staged


@dataclass
class LocalTarget:
    name: str = "local"
    python: str | None = None  # the user's interpreter (with torch); default: this one
    env: dict[str, str] = field(default_factory=dict)

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

    async def prepare(self) -> None:
        return None

    async def stage(self, payload: dict, store) -> Staged:
        return Staged(payload)

    async def collect(self, staged: Staged, outcome: dict, store) -> None:
        return None

    async def discard(self, staged: Staged) -> None:
        return None

    async def kill(self) -> None:
        return None  # the local agent's process group is killed by the job itself
