"""A fine-tuning step written for torch-xla, the XLA stack of torch-neuronx 2.x that
optimum-neuron pins: AdamW, gradient clipping and ``xm.optimizer_step``, as its users write them.

`step` logs its loss with ``loss.item()``: on XLA that reads a lazy tensor on the host, so the
pending graph executes there, mid-step, and every step is two graphs instead of one.
`trnlens check samples/xla_finetune.py` finds it without running anything (TRN302), and
`trnlens compare --backend xla --python ~/.cache/trnlens/xla-venv-torch2.8.0-xla2.8.0/bin/python
samples/xla_finetune.py::step samples/xla_finetune.py::step_logged_later` measures it, with the
torch-xla that `scripts/setup-xla.sh` installs: graphs per step and the forced execution at its
line, both steps from the same state.
"""

import torch
import torch_xla.core.xla_model as xm
from torch import nn


def make_inputs():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    return model, optimizer, torch.randn(8, 64), torch.randn(8, 64)


# trnlens: inputs=make_inputs
def step(model, optimizer, x, y):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    xm.optimizer_step(optimizer)
    optimizer.zero_grad(set_to_none=True)
    print(f"loss {loss.item():.4f}")  # a host read: the graph executes here (TRN302)
    return loss


# trnlens: inputs=make_inputs
def step_logged_later(model, optimizer, x, y):
    """The same step; the loss is returned on the device and read after the step's sync."""
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    xm.optimizer_step(optimizer)
    optimizer.zero_grad(set_to_none=True)
    return loss
