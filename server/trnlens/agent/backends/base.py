"""The questions every backend answers; the CPU backend is the simplest answer."""

from __future__ import annotations

import platform


class Backend:
    name = "base"
    time_basis = "device"  # "device" when an accelerator's own clock measured the ops, else "cpu"
    compile_backend: str | None = (
        None  # torch.compile backend for the compiled variant (None: default)
    )

    # Inference under torch.inference_mode() (else no_grad()); torch.profiler's record_shapes
    # where a pass asks for it (it keeps tensors alive, which an XLA graph would output).
    inference_mode = True
    profile_shapes = True

    def __init__(self, torch, options: dict):
        self.torch = torch
        self.options = options
        self.warnings: list[str] = []

    # -- what runs where
    @property
    def device(self):
        raise NotImplementedError

    def device_name(self) -> str:
        return str(self.device)

    def available(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Waits until the device finished the work queued so far (each step, inside the loop)."""

    # -- profiler set-up
    def activities(self) -> list:
        raise NotImplementedError

    def profiler_kwargs(self, out_dir: str) -> dict:
        """Extra keyword arguments for torch.profiler.profile (e.g. experimental_config).

        ``out_dir`` is this run's artifact directory, for backends whose tooling writes files.
        """
        return {}

    def on_trace_ready(self, prof) -> None:
        """Called with the profiler when the active steps end, before trnlens reads the events."""

    # -- reading figures
    def self_device_us(self, event) -> float:
        return float(
            getattr(event, "self_device_time_total", None)
            or getattr(event, "self_privateuse1_time_total", None)
            or getattr(event, "self_cuda_time_total", None)
            or 0.0
        )

    def device_total_us(self, event) -> float:
        return float(
            getattr(event, "device_time_total", None)
            or getattr(event, "privateuse1_time_total", None)
            or getattr(event, "cuda_time_total", None)
            or 0.0
        )

    def reset_peak_memory(self) -> None:
        pass

    def peak_memory_bytes(self) -> int | None:
        return None

    def memory_limit(self) -> tuple[int, str] | None:
        """How much memory the run's device has, and what that figure is (None: unknown): what
        a rank's peak is measured against (agent/ranks/merge.py names the rank nearest it)."""
        return None

    def versions(self) -> dict:
        return {
            "python": platform.python_version(),
            "torch": self.torch.__version__,
            "torch_neuronx": None,
        }

    def artifacts(self, out_dir: str) -> list[dict]:
        """Files the backend's own tooling wrote into ``out_dir`` (NEFF/NTFF on neuron)."""
        return []
