"""STAND-IN for the older XLA-based torch-neuronx (before Neuron 2.33): no profiling module."""

import torch_xla  # noqa: F401

__version__ = "2.1.2.2.20.0"


def trace(func, example_inputs):
    raise NotImplementedError("stand-in")
