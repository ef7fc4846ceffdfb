"""What a target has, for `trnlens targets check`: python, torch, torch_neuronx, devices, tools.

Runs with ``--probe`` in the shipped bundle; imports torch and torch_neuronx only to look, and
reports each problem as a sentence instead of raising.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import shutil
import socket
import sys

EXPLORER = "/opt/aws/neuron/bin/neuron-explorer"


def probe() -> dict:
    report: dict = {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "executable": sys.executable,
        "torch": None,
        "torch_neuronx": None,
        "torch_xla": _version("torch_xla"),  # the XLA stack (--backend xla), read without import
        "cuda_devices": 0,
        "neuron_cores": None,
        "neuron_explorer": None,
        "visible_cores": os.environ.get("NEURON_RT_VISIBLE_CORES"),
        "problems": [],
    }
    try:
        torch = importlib.import_module("torch")
    except Exception as exc:  # ImportError, or a broken install
        report["problems"].append(f"torch cannot be imported: {exc}")
        return report
    report["torch"] = torch.__version__
    try:
        report["cuda_devices"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception as exc:
        report["problems"].append(f"cuda query failed: {exc}")
    if importlib.util.find_spec("torch_neuronx") is not None:
        from .backends.neuron import NeuronBackend, XlaBasedNeuron

        try:
            backend = NeuronBackend(torch, {}, ".")
            report["torch_neuronx"] = backend.versions()["torch_neuronx"]
            count = getattr(backend.neuron, "device_count", None)
            report["neuron_cores"] = count() if callable(count) else None
        except XlaBasedNeuron as exc:  # torch-neuronx 2.x: profiled on its XLA stack
            report["torch_neuronx"] = getattr(exc.module, "__version__", "unknown") + " (XLA-based)"
        except Exception as exc:  # AgentError with the placeholder message, or worse
            report["problems"].append(getattr(exc, "message", str(exc)))
    explorer = shutil.which("neuron-explorer") or (EXPLORER if os.path.exists(EXPLORER) else None)
    report["neuron_explorer"] = explorer
    return report


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        return None
