"""The XLA tensors a step leaves pending for its sync: whose IR is the graph the sync compiles.

An IR text read from the step's outputs alone misses what a training step computes beside them
(the parameters' updates, their gradients, the optimizer's state): those are reached from the
step's inputs, and from what the step's ops made that something still holds.
"""

from __future__ import annotations

from typing import Any


def tensors(out: Any, made: list, roots, torch) -> list:
    """The XLA tensors the step leaves for its sync: what it returned, what its ops made and
    something still holds, and the tensors of its inputs (parameters, their gradients, the
    optimizer's state), each once."""
    seen: dict[int, Any] = {}

    def add(value: Any, depth: int = 0) -> None:
        if depth > 4 or value is None:
            return
        if isinstance(value, torch.Tensor):
            if value.device.type == "xla":
                seen.setdefault(id(value), value)
                if value.is_leaf and value.grad is not None:
                    add(value.grad, depth + 1)
        elif isinstance(value, torch.nn.Module):
            for tensor in [*value.parameters(), *value.buffers()]:
                add(tensor, depth + 1)
        elif isinstance(value, torch.optim.Optimizer):
            for state in value.state.values():
                add(state, depth + 1)
        elif isinstance(value, dict):
            for item in value.values():
                add(item, depth + 1)
        elif isinstance(value, (list, tuple)):
            for item in value:
                add(item, depth + 1)

    add(out)
    for ref in made:
        tensor = ref()
        if tensor is not None:
            try:
                tensor._fix_weakref()  # a tensor taken out of a weak reference must be told so
                add(tensor)
            except RuntimeError:  # freed meanwhile on the C++ side: nothing pending there
                continue
    for root in roots:
        add(root)
    return list(seen.values())
