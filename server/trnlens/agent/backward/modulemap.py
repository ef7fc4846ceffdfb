"""The nn.Module behind a parameter or an autograd node, by the names the run gives modules.

Two ways in, one answer each:
- a parameter (what an ``AccumulateGrad`` node writes, what a DDP bucket holds) belongs to the
  module that registers it (``parameter_modules``);
- any other node was made by a forward op (``links.BackwardLinks``), which ran in the module
  whose label encloses it (``NodeModules``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .links import BackwardLinks


def parameter_modules(named_modules: Iterable[tuple[str, Any]]) -> dict[int, str]:
    """id(parameter) -> the name of the module that registers it (its first name in
    ``named_modules`` order when a parameter is shared, such as tied embeddings)."""
    owners: dict[int, str] = {}
    for name, module in named_modules:
        for param in module.parameters(recurse=False):
            owners.setdefault(id(param), name)
    return owners


class NodeModules:
    """The module that made each autograd node of one profile.

    ``module_of_event`` says which module an event ran in (for the attribution pass: the
    innermost ``trnlens.module:`` label above it); ``owners`` is ``parameter_modules``'s map."""

    def __init__(
        self,
        links: BackwardLinks,
        module_of_event: Callable[[Any], Any],
        owners: dict[int, str] | None = None,
    ):
        self.links = links
        self.module_of_event = module_of_event
        self.owners = owners or {}

    def of_event(self, event):
        """The module whose forward made the node ``event`` ran in, or None (forward work, a node
        no forward op in the profile made)."""
        _, forward = self.links.forward_of(event)
        return None if forward is None else self.module_of_event(forward)

    def of_node(self, node) -> Any:
        """The module of a live autograd node (``tensor.grad_fn`` or a node reached from it):
        an ``AccumulateGrad``'s parameter's owner; else the module of the forward op that took
        the node's sequence number on this thread."""
        variable = getattr(node, "variable", None)
        if variable is not None:
            return self.owners.get(id(variable))
        seq = node._sequence_nr() if hasattr(node, "_sequence_nr") else -1
        forward = self.links.creator(seq)
        return None if forward is None else self.module_of_event(forward)
