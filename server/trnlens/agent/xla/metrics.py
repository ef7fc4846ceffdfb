"""A snapshot of torch-xla's process-wide metrics and counters, and the difference of two.

torch_xla.debug.metrics keeps, for the whole process: metrics (``metric_data(name)``: count,
accumulated value in ns or bytes, samples) and counters (``counter_value(name)``). The names
read here are torch-xla's own (2.x): ``CompileTime``, ``ExecuteTime`` (``ExecuteReplicatedTime``
for SPMD), ``TransferToDeviceTime``, ``TransferFromDeviceTime``, ``OutboundData`` and
``InboundData`` (bytes), counters ``UncachedCompile``, ``CachedCompile``, ``MarkStep``, and
``aten::<op>`` for each op that fell back to the CPU (``executed_fallback_ops()``), among which
``aten::_local_scalar_dense`` is a host read (``.item()``, ``bool(t)``), not a missing lowering.
Every name is feature-detected: a missing one reads as 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

HOST_READ_OP = "aten::_local_scalar_dense"
_EXECUTE = ("ExecuteTime", "ExecuteReplicatedTime")


@dataclass
class Snapshot:
    executions: int = 0
    execute_ns: float = 0.0
    compiles: int = 0  # CompileTime samples: every compilation, cached or not in the disk cache
    compile_ns: float = 0.0
    uncached: int = 0  # UncachedCompile: graphs not found in the in-memory cache
    cached: int = 0  # CachedCompile: graphs found there (no compilation)
    to_device: int = 0
    to_device_ns: float = 0.0
    to_device_bytes: float = 0.0
    from_device: int = 0
    from_device_ns: float = 0.0
    from_device_bytes: float = 0.0
    host_reads: int = 0
    # torch-xla's persistent compilation cache (runtime.initialize_cache): graphs loaded from
    # disk instead of compiled; a platform that cannot load them (the CPU device) fails each
    persistent_hits: int = 0
    persistent_misses: int = 0
    persistent_failures: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)  # aten::op -> count

    def minus(self, before: Snapshot) -> Snapshot:
        out = Snapshot()
        for name in self.__dataclass_fields__:
            if name != "fallbacks":
                setattr(out, name, getattr(self, name) - getattr(before, name))
        out.fallbacks = {
            op: count - before.fallbacks.get(op, 0)
            for op, count in self.fallbacks.items()
            if count - before.fallbacks.get(op, 0)
        }
        return out


class Metrics:
    """Reads the snapshot; ``met`` is torch_xla.debug.metrics."""

    def __init__(self, met: Any):
        self.met = met

    def _metric(self, name: str) -> tuple[int, float]:
        data = self.met.metric_data(name)
        if not data:
            return 0, 0.0
        return int(data[0]), float(data[1])

    def counter(self, name: str) -> int:
        return int(self.met.counter_value(name) or 0)

    def executions(self) -> int:
        return sum(self._metric(name)[0] for name in _EXECUTE)

    def snapshot(self) -> Snapshot:
        s = Snapshot()
        for name in _EXECUTE:
            count, total = self._metric(name)
            s.executions += count
            s.execute_ns += total
        s.compiles, s.compile_ns = self._metric("CompileTime")
        s.uncached = self.counter("UncachedCompile")
        s.cached = self.counter("CachedCompile")
        s.to_device, s.to_device_ns = self._metric("TransferToDeviceTime")
        s.from_device, s.from_device_ns = self._metric("TransferFromDeviceTime")
        s.persistent_hits = self.counter("PersistentCacheHit")
        s.persistent_misses = self.counter("PersistentCacheMiss")
        s.persistent_failures = self.counter("PersistentCacheDeserializeFailure")
        s.to_device_bytes = self._metric("OutboundData")[1]
        s.from_device_bytes = self._metric("InboundData")[1]
        for op in self.met.executed_fallback_ops():
            if op == HOST_READ_OP:
                s.host_reads = self.counter(op)
            else:
                s.fallbacks[op] = self.counter(op)
        return s
