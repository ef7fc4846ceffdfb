"""The Neuron backend (Trainium), written against the documented TorchNeuron API (docs/neuron.md).

The recipe: activities CPU + PrivateUse1, a ``NeuronConfig`` with DEVICE + RUNTIME modes as the
profiler's ``experimental_config``, ``NeuronProfiler(cfg).export_trace`` as ``on_trace_ready``,
and ``torch.neuron.synchronize()`` inside the loop (Neuron is asynchronous). Parameters the docs
do not confirm (``correlate_device_time``) are feature-detected, never assumed.

No Trainium exists where trnlens is developed: this module is exercised by tests against a
stand-in ``torch_neuronx`` (tests/agent/standin/), which checks the call sequence, not the device.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Any

from .. import errors
from .base import Backend

INSTALL = (
    'pip install "torch-neuronx==2.14.*" "neuronx-cc==2.*" nki '
    "with AWS's Neuron package index as an extra index (Neuron 2.33 or later)"
)


def present() -> bool:
    return importlib.util.find_spec("torch_neuronx") is not None


def _import_torch_neuronx():
    try:
        return importlib.import_module("torch_neuronx")
    except ModuleNotFoundError as exc:
        if exc.name == "torch_neuronx":
            xla = importlib.util.find_spec("torch_xla") is not None
            raise errors.environment(
                f"the neuron backend needs torch_neuronx, which is not installed for this "
                f"interpreter: {INSTALL}"
                + (
                    "; torch_xla is installed here: --backend xla profiles its PJRT device"
                    if xla
                    else ""
                )
            ) from None
        raise errors.environment(f"import torch_neuronx failed: {exc}") from None
    except Exception as exc:  # the PyPI placeholder raises on import
        if "WRONG PACKAGE" in str(exc):
            raise errors.environment(
                "the torch-neuronx installed here is the public index's placeholder package "
                f"(its import says 'WRONG PACKAGE'), not AWS's: pip uninstall torch-neuronx, "
                f"then {INSTALL}"
            ) from None
        raise errors.environment(
            f"import torch_neuronx failed: {type(exc).__name__}: {exc}"
        ) from None


def _is_xla_based(module) -> bool:
    if importlib.util.find_spec("torch_xla") is not None:
        return True
    return any(hasattr(module, name) for name in ("xla_impl", "trace")) and not hasattr(
        module, "profiling"
    )


class XlaBasedNeuron(errors.AgentError):
    """The installed torch-neuronx is the XLA-based package (before Neuron 2.33, what
    optimum-neuron pins): no native 'neuron' device, no torch_neuronx.profiling. backends.select
    answers it with the xla backend."""

    def __init__(self, module, version: str):
        super().__init__(
            "environment",
            f"torch-neuronx {version} here is the older XLA-based package (before Neuron 2.33), "
            "which has no native 'neuron' device or torch_neuronx.profiling: use --backend xla "
            f"(PJRT_DEVICE=NEURON), or for TorchNeuron: {INSTALL}",
        )
        self.module = module


class NeuronBackend(Backend):
    name = "neuron"
    time_basis = "device"
    compile_backend = "neuron"

    def __init__(self, torch, options: dict, artifacts_dir: str):
        super().__init__(torch, options)
        self.module = _import_torch_neuronx()
        try:
            profiling = importlib.import_module("torch_neuronx.profiling")
        except ImportError:
            version = getattr(self.module, "__version__", "unknown")
            if _is_xla_based(self.module):
                # Not an error: backends.select profiles it on its XLA stack (backends/xla.py).
                raise XlaBasedNeuron(self.module, version) from None
            raise errors.environment(
                f"torch-neuronx {version} has no torch_neuronx.profiling module: {INSTALL}"
            ) from None
        self.NeuronConfig = profiling.NeuronConfig
        self.ProfileMode = profiling.ProfileMode
        self.NeuronProfiler = profiling.NeuronProfiler
        neuron = getattr(torch, "neuron", None)
        if neuron is None:
            raise errors.environment(
                "torch.neuron is missing after importing torch_neuronx: this is not TorchNeuron "
                f"(the native backend). {INSTALL}"
            )
        self.neuron = neuron
        # torch_neuronx has no type information: its NeuronProfiler and NeuronConfig, made by
        # profiler_kwargs() before the profiler runs, are untyped objects.
        self._exporter: Any = None
        self._config: Any = None

    @property
    def device(self):
        return self.torch.device(self.options.get("device") or "neuron")

    def available(self) -> bool:
        is_available = getattr(self.neuron, "is_available", None)
        return bool(is_available()) if callable(is_available) else True

    def device_name(self) -> str:
        count = getattr(self.neuron, "device_count", None)
        cores = f", {count()} NeuronCores visible" if callable(count) else ""
        return f"{self.device}{cores}"

    def synchronize(self) -> None:
        self.neuron.synchronize()

    def activities(self) -> list:
        activity = self.torch.profiler.ProfilerActivity
        return [activity.CPU, activity.PrivateUse1]

    def profiler_kwargs(self, out_dir: str) -> dict:
        profile_dir = os.path.join(out_dir, "neuron")
        os.makedirs(profile_dir, exist_ok=True)
        kwargs = {
            "modes": [self.ProfileMode.DEVICE, self.ProfileMode.RUNTIME],
            "profile_output_dir": profile_dir,
        }
        if self.options.get("neff_cache_dir"):
            kwargs["neff_cache_dir"] = self.options["neff_cache_dir"]
        try:
            # correlate_device_time propagates device time into key_averages(); unconfirmed
            # in the docs, so try it and fall back without it.
            self._config = self.NeuronConfig(correlate_device_time=True, **kwargs)
        except TypeError:
            self._config = self.NeuronConfig(**kwargs)
            self.warnings.append(
                "this torch_neuronx's NeuronConfig has no correlate_device_time: device times in "
                "the op table may be empty; the NEFF/NTFF artifacts still hold the device profile"
            )
        self._exporter = self.NeuronProfiler(self._config)
        return {"experimental_config": self._config}

    def on_trace_ready(self, prof) -> None:
        self._exporter.export_trace(prof)

    def reset_peak_memory(self) -> None:
        reset = getattr(self.neuron, "reset_peak_memory_stats", None)
        if callable(reset):
            reset()

    def peak_memory_bytes(self) -> int | None:
        peak = getattr(self.neuron, "max_memory_allocated", None)
        return int(peak()) if callable(peak) else None

    def versions(self) -> dict:
        versions = super().versions()
        versions["torch_neuronx"] = getattr(self.module, "__version__", "unknown")
        return versions

    def artifacts(self, out_dir: str) -> list[dict]:
        kinds = {".neff": "neff", ".ntff": "ntff", ".pb": "runtime_trace", ".json": "neuron_trace"}
        found = []
        root = os.path.join(out_dir, "neuron")
        for directory, _, files in os.walk(root):
            for filename in sorted(files):
                kind = kinds.get(os.path.splitext(filename)[1])
                if kind:
                    path = os.path.relpath(os.path.join(directory, filename), out_dir)
                    found.append({"kind": kind, "path": path.replace(os.sep, "/")})
        return found
