"""Where device time comes from: one module per backend, chosen by name or ``auto``.

Every backend answers the same questions (device, how to synchronise, which profiler activities
and config, how to read an event's device time, what artifacts it leaves), so the measurement
code has no ``if backend == ...`` in it.
"""

from __future__ import annotations

import os

from .. import errors
from .base import Backend

NAMES = ("auto", "cpu", "cuda", "neuron", "xla")


def select(name: str, torch, options: dict, artifacts_dir: str) -> Backend:
    if name not in NAMES:
        raise errors.usage(f"unknown backend {name!r}: choose one of {', '.join(NAMES)}")
    if name == "auto":
        return _auto(torch, options, artifacts_dir)
    if name == "cpu":
        from .cpu import CpuBackend

        return CpuBackend(torch, options)
    if name == "cuda":
        from .cuda import CudaBackend

        return CudaBackend(torch, options)
    if name == "xla":
        from .xla import XlaBackend

        return XlaBackend(torch, options)
    from .neuron import NeuronBackend, XlaBasedNeuron
    from .xla import before_import

    before_import()  # the XLA-based torch_neuronx imports torch_xla
    try:
        return NeuronBackend(torch, options, artifacts_dir)
    except XlaBasedNeuron as exc:  # torch-neuronx 2.x before Neuron 2.33: its XLA stack
        from .xla import XlaBackend

        return XlaBackend(torch, options, neuron_module=exc.module)


def _auto(torch, options: dict, artifacts_dir: str) -> Backend:
    """Neuron when TorchNeuron imports and sees a device (the XLA-based torch-neuronx: its XLA
    stack), torch-xla when PJRT_DEVICE names a device, then CUDA, then the CPU."""
    notes = []
    backend: Backend
    from . import neuron

    if neuron.present():
        from .xla import before_import

        before_import()  # the XLA-based torch_neuronx imports torch_xla
        try:
            backend = neuron.NeuronBackend(torch, options, artifacts_dir)
            if backend.available():
                return backend
            notes.append("torch_neuronx is installed but sees no NeuronCore")
        except neuron.XlaBasedNeuron as exc:
            from .xla import XlaBackend

            return XlaBackend(torch, options, neuron_module=exc.module)
        except errors.AgentError as exc:
            notes.append(f"neuron backend not usable: {exc.message}")
    from . import xla

    if os.environ.get("PJRT_DEVICE") and xla.present():  # the user chose a PJRT device
        return xla.XlaBackend(torch, options)
    if torch.cuda.is_available():
        from .cuda import CudaBackend

        backend = CudaBackend(torch, options)
    else:
        from .cpu import CpuBackend

        backend = CpuBackend(torch, options)
    backend.warnings.extend(f"auto backend: {note}; using {backend.name}" for note in notes)
    return backend
