"""The CUDA backend: kernel time from CUPTI, ``torch.cuda.synchronize()`` every step."""

from __future__ import annotations

from .. import errors
from .base import Backend


class CudaBackend(Backend):
    name = "cuda"
    time_basis = "device"

    def __init__(self, torch, options: dict):
        super().__init__(torch, options)
        if not torch.cuda.is_available():
            built = torch.version.cuda
            why = (
                "this torch is a CPU-only build"
                if not built
                else f"this torch (CUDA {built}) sees no GPU"
            )
            raise errors.environment(f"the cuda backend is not usable here: {why}")

    @property
    def device(self):
        return self.torch.device(self.options.get("device") or "cuda")

    def device_name(self) -> str:
        return f"{self.device} ({self.torch.cuda.get_device_name(self.device)})"

    def synchronize(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def activities(self) -> list:
        activity = self.torch.profiler.ProfilerActivity
        return [activity.CPU, activity.CUDA]

    def reset_peak_memory(self) -> None:
        self.torch.cuda.reset_peak_memory_stats(self.device)

    def peak_memory_bytes(self) -> int | None:
        return int(self.torch.cuda.max_memory_allocated(self.device))

    def memory_limit(self) -> tuple[int, str] | None:
        total = self.torch.cuda.get_device_properties(self.device).total_memory
        return int(total), "the GPU's memory (torch.cuda.get_device_properties().total_memory)"

    def versions(self) -> dict:
        versions = super().versions()
        versions["cuda"] = self.torch.version.cuda
        return versions
