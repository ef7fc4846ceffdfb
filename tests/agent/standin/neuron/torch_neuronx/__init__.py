"""STAND-IN for AWS's torch_neuronx (TorchNeuron), for tests only: logs calls, runs no device."""

import json
import os
import types

import torch

__version__ = "2.14.0+standin"


def log(call, **fields):
    path = os.environ.get("TRNLENS_STANDIN_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"call": call, **fields}) + "\n")


log("import torch_neuronx")

torch.neuron = types.SimpleNamespace(
    synchronize=lambda: log("torch.neuron.synchronize"),
    is_available=lambda: True,
    device_count=lambda: 2,
)
