"""Which process-group backend a rank asks for. Neuron's cannot exist here: a stand-in torch
(named so) says which backends are registered; the real ones are checked on the CPU."""

from __future__ import annotations

import types

import pytest
from trnlens.agent import errors
from trnlens.agent.ranks import lockstep as distributed


def standin_torch(cuda: bool, registered: set[str]):
    """A stand-in for torch: only what choose_backend reads."""
    dist = types.SimpleNamespace(is_backend_available=lambda name: name in registered)
    return types.SimpleNamespace(
        distributed=dist, cuda=types.SimpleNamespace(is_available=lambda: cuda)
    )


def test_gloo_on_the_cpu_and_nccl_on_cuda():
    torch = standin_torch(cuda=True, registered={"gloo", "nccl"})
    assert distributed.choose_backend(torch, "cpu") == "gloo"
    assert distributed.choose_backend(torch, "cuda") == "nccl"
    assert distributed.choose_backend(torch, "auto") == "nccl"
    assert distributed.choose_backend(standin_torch(False, {"gloo"}), "auto") == "gloo"


def test_neuron_uses_the_backend_torch_neuronx_registers():
    torch = standin_torch(cuda=False, registered={"gloo", "neuron"})
    assert distributed.choose_backend(torch, "neuron") == "neuron"
    assert distributed.choose_backend(torch, "auto") == "neuron"


def test_neuron_without_a_registered_backend_says_so():
    with pytest.raises(errors.AgentError) as caught:
        distributed.choose_backend(standin_torch(False, {"gloo"}), "neuron")
    assert caught.value.kind == "environment" and "untested here" in caught.value.message


def test_the_real_torch_has_gloo():
    import torch

    assert distributed.choose_backend(torch, "cpu") == "gloo"
    assert torch.distributed.is_backend_available("gloo")
