"""The XLA backend: any PJRT device through torch-xla (CPU, TPU, CUDA, and Trainium's XLA-based
torch-neuronx 2.x, which optimum-neuron pins), docs/neuron.md "The XLA-based stack".

Tensors on an XLA device are lazy: ops record IR, and ``torch_xla.sync()`` compiles the pending
graph (or finds it in the cache) and executes it. So every step ends with ``torch_xla.sync()``
and ``xm.wait_device_ops()`` (the execution is asynchronous), and what costs time is per graph,
not per dispatch: the step's graphs, compilations, transfers, CPU fallbacks and host reads are
measured by ``agent/xla/`` from ``torch_xla.debug.metrics``.

torch.profiler's events here are the host's: tracing the lazy ops, plus the sync (compile and
execute) inside each step. The result's time basis is therefore "cpu", and the device's own
execute time is the XLA section's ``ExecuteTime`` figure (on the CPU PJRT device it is the host
running the compiled graph; on Trainium the Neuron runtime's).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

from .. import errors
from .base import Backend

INSTALL = 'pip install "torch-xla==<your torch version>" (e.g. torch==2.8.0 torch-xla==2.8.0)'


def present() -> bool:
    return importlib.util.find_spec("torch_xla") is not None


def before_import() -> None:
    """XLA_IR_DEBUG=1 (every IR node keeps its Python frame) is read when torch_xla is first
    imported, and the XLA-based torch_neuronx imports it: called before torch_neuronx is tried."""
    if present() and "torch_xla" not in sys.modules:
        os.environ.setdefault("XLA_IR_DEBUG", "1")


class XlaBackend(Backend):
    name = "xla"
    time_basis = "cpu"  # host time: tracing plus the sync; device execute time is the XLA section's
    compile_backend = "openxla"
    # XLA's views of inference tensors fail ("Cannot set version_counter for inference
    # tensor"); and record_shapes keeps the step's intermediates alive, which then become outputs
    # of the graph: another graph, a recompilation that the step itself never makes.
    inference_mode = False
    profile_shapes = False

    def __init__(self, torch, options: dict, neuron_module: Any = None):
        super().__init__(torch, options)
        self.neuron_module = neuron_module  # the XLA-based torch_neuronx, when it chose this
        if not os.environ.get("PJRT_DEVICE"):
            # torch-xla needs a PJRT device; the XLA-based torch-neuronx registers NEURON.
            os.environ["PJRT_DEVICE"] = "NEURON" if neuron_module is not None else "CPU"
            self.warnings.append(
                f"PJRT_DEVICE was not set: using {os.environ['PJRT_DEVICE']} (set PJRT_DEVICE "
                "in the target's env to choose another device)"
            )
        self.ir_debug = self._ir_debug()
        try:
            self.torch_xla = importlib.import_module("torch_xla")
            self.xm = importlib.import_module("torch_xla.core.xla_model")
            self.runtime = importlib.import_module("torch_xla.runtime")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("torch_xla"):
                raise errors.environment(
                    f"the xla backend needs torch_xla, which is not installed for this "
                    f"interpreter: {INSTALL}"
                ) from None
            raise errors.environment(f"import torch_xla failed: {exc}") from None
        except Exception as exc:
            raise errors.environment(
                f"import torch_xla failed: {type(exc).__name__}: {exc}"
            ) from None
        sync = getattr(self.torch_xla, "sync", None)
        # torch_xla.sync() since 2.5; xm.mark_step() before (the same thing).
        self._sync = sync if callable(sync) else self.xm.mark_step
        if not self.ir_debug:
            self.warnings.append(
                "torch_xla was imported before trnlens could set XLA_IR_DEBUG=1 (a warm agent, or "
                "imported by something earlier): IR nodes have no source lines in this run"
            )
        if neuron_module is not None:
            version = getattr(neuron_module, "__version__", "unknown")
            self.warnings.append(
                f"torch-neuronx {version} is the XLA-based package (before Neuron 2.33): profiled "
                "on its XLA stack (graphs, compilations, fallbacks, host reads); the Neuron "
                "runtime's device profile is captured separately (docs/neuron.md)"
            )

    def _ir_debug(self) -> bool:
        """XLA_IR_DEBUG=1 gives every IR node the Python frame that made it; it is read when
        torch_xla is first imported, so it can be set only before that."""
        if "torch_xla" in sys.modules:
            return os.environ.get("XLA_IR_DEBUG") == "1"
        os.environ.setdefault("XLA_IR_DEBUG", "1")
        return os.environ["XLA_IR_DEBUG"] == "1"

    @property
    def device(self):
        device = getattr(self.torch_xla, "device", None)
        return device() if callable(device) else self.xm.xla_device()

    def device_name(self) -> str:
        try:
            kind = self.runtime.device_type()
        except Exception:  # noqa: BLE001 - the name is a label, never a failure
            kind = os.environ.get("PJRT_DEVICE", "?")
        return f"{self.device} (PJRT {kind})"

    def sync(self) -> None:
        """Compiles (or finds in the cache) and executes the pending graph, then waits for it."""
        self._sync()
        self.xm.wait_device_ops()

    def synchronize(self) -> None:
        self.sync()

    def activities(self) -> list:
        return [self.torch.profiler.ProfilerActivity.CPU]

    def self_device_us(self, event) -> float:
        return float(event.self_cpu_time_total)

    def device_total_us(self, event) -> float:
        return float(event.cpu_time_total)

    def versions(self) -> dict:
        versions = super().versions()
        versions["torch_xla"] = getattr(self.torch_xla, "__version__", "unknown")
        versions["pjrt_device"] = os.environ.get("PJRT_DEVICE")
        if self.neuron_module is not None:
            versions["torch_neuronx"] = getattr(self.neuron_module, "__version__", "unknown")
        return versions
