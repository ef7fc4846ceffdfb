"""Several hosts as one target: ``nodes`` names other targets, one torchrun on each.

``[tool.trnlens.targets.pair] nodes = ["trn-a", "trn-b"]`` (with ``nproc_per_node``) runs
``nproc_per_node`` ranks on each named host; the first one hosts the rendezvous (its ``address``,
else its ssh host name, must be reachable from the others). multihost.py runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trnlens.targets.base import TargetError
from trnlens.targets.local import LocalTarget
from trnlens.targets.ssh import SshTarget

MAX_NODES = 64


@dataclass
class NodesTarget:
    name: str
    nodes: list[LocalTarget | SshTarget] = field(default_factory=list)
    nproc_per_node: int | None = None  # ranks per host (each node's own setting is not used)
    backend: str = "auto"

    def __post_init__(self) -> None:
        if not 2 <= len(self.nodes) <= MAX_NODES:
            raise TargetError(
                f"target {self.name!r}: nodes must name 2 to {MAX_NODES} targets, got "
                f"{len(self.nodes)}"
            )
        names = [node.name for node in self.nodes]
        if len(set(names)) != len(names):
            raise TargetError(f"target {self.name!r}: nodes names a target twice: {names}")

    def describe(self) -> str:
        return f"{self.name} ({', '.join(node.describe() for node in self.nodes)})"

    def secrets(self) -> list[str]:
        return [secret for node in self.nodes for secret in node.secrets()]
