"""The CPU backend: the host is the device, so "device time" is the ops' own CPU time.

Its results say ``time_basis: "cpu"`` and every label downstream says CPU: nothing here claims
accelerator time.
"""

from __future__ import annotations

import platform

from .base import Backend


class CpuBackend(Backend):
    name = "cpu"
    time_basis = "cpu"

    @property
    def device(self):
        return self.torch.device(self.options.get("device") or "cpu")

    def device_name(self) -> str:
        threads = self.torch.get_num_threads()
        noun = "thread" if threads == 1 else "threads"
        return f"cpu ({platform.machine()}, {threads} {noun})"

    def activities(self) -> list:
        return [self.torch.profiler.ProfilerActivity.CPU]

    def self_device_us(self, event) -> float:
        return float(event.self_cpu_time_total)

    def device_total_us(self, event) -> float:
        return float(event.cpu_time_total)
