"""What a step on an XLA device holds there between steps, and the device allocator's figures.

The memory pass (``memorypass.py``) reads torch's allocator; an XLA tensor's storage is the
PJRT runtime's, so that pass does not run here. Two figures can be read instead, for real:

- **Held between steps**: the XLA tensors reachable from the step's inputs once a step has
  synced, by kind: the modules' parameters and buffers, the parameters' gradients, the
  optimizer's state. This is what stays on the device for the whole job (the floor under every
  step's peak), counted exactly from the tensors' shapes and dtypes; what a step makes and frees
  (activations, temporaries) is not in it.
- **The allocator's own figures** (``xm.get_memory_info``: bytes in use, the limit and, where
  the plugin keeps it, the peak), where the PJRT plugin gives them: the Neuron plugin on a
  Trainium host (untested here: no Trainium); the CPU plugin answers UNIMPLEMENTED, which the
  section says.
"""

from __future__ import annotations

from typing import Any

BASIS = "XLA tensors reachable from the step's inputs after its sync"
KINDS = ("parameters", "gradients", "optimizer_state", "buffers")


def section(torch: Any, xm: Any, device: Any, roots: list) -> dict:
    held = held_bytes(torch, roots)
    found, note = allocator(xm, device)
    return {
        "held_bytes": held,
        "held_total_bytes": sum(held.values()),
        "held_basis": BASIS,
        "allocator": found,
        "allocator_note": note,
    }


def held_bytes(torch: Any, roots: list) -> dict[str, int]:
    """Bytes of the XLA tensors the inputs reach, by kind, each tensor once (a parameter an
    optimizer also lists is a parameter)."""
    kinds: dict[int, tuple[str, int]] = {}

    def add(tensor: Any, kind: str) -> None:
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "xla":
            kinds.setdefault(id(tensor), (kind, tensor.numel() * tensor.element_size()))

    def walk(value: Any, depth: int = 0) -> None:
        if depth > 4 or value is None:
            return
        if isinstance(value, torch.nn.Module):
            for parameter in value.parameters():
                add(parameter, "parameters")
                add(parameter.grad, "gradients")
            for buffer in value.buffers():
                add(buffer, "buffers")
        elif isinstance(value, torch.optim.Optimizer):
            for group in value.param_groups:
                for parameter in group["params"]:
                    add(parameter, "parameters")
                    add(parameter.grad, "gradients")
            for state in value.state.values():
                for tensor in state.values() if isinstance(state, dict) else ():
                    add(tensor, "optimizer_state")
        elif isinstance(value, dict):
            for item in value.values():
                walk(item, depth + 1)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item, depth + 1)

    for root in roots:
        walk(root)
    out = dict.fromkeys(KINDS, 0)
    for kind, size in kinds.values():
        out[kind] += size
    return out


def allocator(xm: Any, device: Any) -> tuple[dict[str, int] | None, str | None]:
    """The plugin's allocator figures (its integer fields, as it names them), or None and why."""
    try:
        found = xm.get_memory_info(device)
    except Exception as exc:  # noqa: BLE001 - a plugin without allocator stats says so
        first = (str(exc).splitlines() or [""])[0][:160]
        return None, f"this PJRT plugin gives no allocator figures ({type(exc).__name__}: {first})"
    if not isinstance(found, dict):
        return None, f"this PJRT plugin's memory info is not a mapping ({type(found).__name__})"
    return {str(k): int(v) for k, v in found.items() if isinstance(v, int)}, None
