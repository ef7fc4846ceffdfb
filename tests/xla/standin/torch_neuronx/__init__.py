"""STAND-IN for the XLA-based torch-neuronx (2.x before Neuron 2.33, what optimum-neuron pins),
which cannot be installed here (AWS's index only). It is what matters to trnlens about that
package: importable, a version, no ``profiling`` module, and the REAL torch_xla beside it."""

import torch_xla  # noqa: F401  (the real one, from the xla venv: scripts/setup-xla.sh)

__version__ = "2.8.0.2.10.16998"  # what optimum-neuron 0.4.5 pins


def trace(func, example_inputs):
    raise NotImplementedError("stand-in: torch_neuronx.trace is not exercised")
