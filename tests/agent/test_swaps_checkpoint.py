"""The checkpoint swap (agent/checkpointing.py): every instance of the class gets a forward that
checkpoints the class's own, drops a cache argument under autograd, and is undone."""

from __future__ import annotations

import torch
from torch import nn
from trnlens.agent import checkpointing, swaps


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(4, 4)
        self.seen: list = []

    def forward(self, x, past_key_values=None):
        self.seen.append(past_key_values)
        return torch.tanh(self.up(x))


def test_the_swap_checkpoints_every_instance_and_is_undone():
    torch.manual_seed(0)
    model = nn.Sequential(Layer(), Layer())
    x = torch.randn(2, 4, requires_grad=True)
    expected = model(x).sum()
    expected.backward()
    grad = x.grad.clone()
    x.grad = None
    swap = {"type_path": f"{__name__}.Layer", "method": "forward", "kind": "checkpoint"}
    done = swaps.apply([swap], [model], torch, "checkpointed")
    assert swaps.count(done) == 2
    cache = object()
    out = model[0](x, past_key_values=cache).sum()
    assert model[0].seen[-1] is None  # the cache is not handed to a checkpointed call
    out = model(x).sum()
    out.backward()  # the recompute runs each forward again
    assert torch.equal(out, expected) and torch.equal(x.grad, grad)
    with torch.no_grad():  # outside autograd: the class's forward, the cache passed
        model[0](x, past_key_values=cache)
    assert model[0].seen[-1] is cache
    swaps.undo(done)
    assert "forward" not in model[0].__dict__
    assert checkpointing.CACHE_ARGUMENTS == ("past_key_values", "past_key_value", "layer_past")
