"""Activation checkpointing as a module swap (``{"kind": "checkpoint"}`` in a variant's
``module_swaps``, swaps.py): the forward each instance of the chosen class gets for that variant.

It calls torch's own ``torch.utils.checkpoint.checkpoint`` (non-reentrant: keyword arguments
pass through) on the class's ``forward``: the instance keeps only its inputs and recomputes its
forward in backward. Outside autograd (no_grad, inference) nothing is kept, so nothing is
checkpointed. A key/value cache handed to a checkpointed layer would be written twice (forward,
then the recompute: torch refuses the recomputed tensors' other shapes), so the checkpointed
calls get none, as transformers' own gradient checkpointing turns the cache off for training
(a training step reads no cache). Which class to checkpoint is the server's choice
(``trnlens/memoryfixes.py``).
"""

from __future__ import annotations

from typing import Any

CACHE_ARGUMENTS = ("past_key_values", "past_key_value", "layer_past")


def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    import torch
    from torch.utils.checkpoint import checkpoint

    if not torch.is_grad_enabled():
        return type(self).forward(self, *args, **kwargs)
    for name in CACHE_ARGUMENTS:
        if kwargs.get(name) is not None:
            kwargs[name] = None
    return checkpoint(type(self).forward, self, *args, use_reentrant=False, **kwargs)
