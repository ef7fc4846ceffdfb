"""The CPU backend: the host is the device, so "device time" is the ops' own CPU time.

Its results say ``time_basis: "cpu"`` and every label downstream says CPU: nothing here claims
accelerator time.
"""

from __future__ import annotations

import os
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

    def memory_limit(self) -> tuple[int, str] | None:
        return host_memory()


# cgroup v2's limit of this process's group (a container's RAM): "max" when it has none
_CGROUP_LIMIT = "/sys/fs/cgroup/memory.max"


def host_memory() -> tuple[int, str] | None:
    """The host's RAM, or its container's limit when that is smaller: what the host's ranks
    share (a process runs out of the smaller one first)."""
    try:
        found = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return None
    basis = "the host's memory, shared by the processes on it"
    try:
        with open(_CGROUP_LIMIT) as f:
            text = f.read().strip()
    except OSError:
        text = "max"
    if text.isdigit() and 0 < int(text) < found:
        found = int(text)
        basis = "the container's memory limit (cgroup memory.max), shared by its processes"
    return found, basis
