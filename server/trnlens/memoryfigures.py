"""A run's memory (agent/memorypass.py) read once, typed, and its words: the CLI, the hover and
the diagnostics say the same figure the same way.

The agent writes plain dicts (``result["memory"]``, its shape in the result schema); this reads
one into attrs classes with cattrs, as lsprotocol reads LSP messages. ``None`` when the run has
no memory pass (an older run, an XLA or Neuron run, the pass turned off).
"""

from __future__ import annotations

from typing import Any

import attrs
import cattrs

from trnlens import units
from trnlens.agent import memorypass

# What each kind means, in the order it is shown (the largest part first is left to the reader:
# a fixed order lets two runs be read side by side).
KINDS = {
    "parameters": "parameters",
    "gradients": "gradients",
    "optimizer_state": "optimizer state",
    "activations": "activations kept for backward",
    "temporaries": "temporaries",
    "inputs": "inputs",
    "kept": "kept by earlier steps",
    "autograd": "autograd's own",
    "other": "other",
}


@attrs.frozen
class Line:
    path: str | None
    line: int | None


@attrs.frozen
class Growth:
    path: str | None
    line: int | None
    bytes_per_step: int


@attrs.frozen
class Keeper:
    """A module and the bytes of activations its calls made that autograd kept for backward."""

    module: str
    bytes: int


@attrs.frozen
class MadeAt:
    """Bytes of one kind live at the peak that a line (project or library) allocated."""

    path: str
    line: int
    kind: str
    bytes: int


@attrs.frozen
class MadeIn:
    """Bytes of one kind live at the peak that a module's call allocated."""

    module: str
    kind: str
    bytes: int


@attrs.frozen
class Curve:
    """The live bytes over one of the pass's steps (``step``, the peak's), in equal slices of
    its time, and from each of its dispatches to the next: each span's highest level."""

    step: int
    bytes: list[int]
    # the same curve at each of the step's dispatches, and their digest (events.dispatch_digest)
    dispatch_bytes: list[int] = attrs.Factory(list)
    dispatch_digest: str | None = None


@attrs.frozen
class Memory:
    device: str
    steps: int
    basis: str
    peak_bytes: int
    at_peak: dict[str, int]
    growth_per_step_bytes: int
    growth: list[Growth]
    peak_phase: str | None = None
    peak_line: Line | None = None
    activations_by_module: list[Keeper] = attrs.Factory(list)
    curve: Curve | None = None
    # what the steps made that is live at the peak, by where it was allocated (the largest first)
    at_peak_by_line: list[MadeAt] = attrs.Factory(list)
    at_peak_by_library_line: list[MadeAt] = attrs.Factory(list)
    at_peak_by_module: list[MadeIn] = attrs.Factory(list)
    # the device's memory (agent/backends: the GPU's, the host's or its container's RAM)
    limit_bytes: int | None = None
    limit_basis: str | None = None
    rank: int | None = None  # a multi-rank run's: whose memory pass this is (rank 0's)

    @property
    def grows(self) -> bool:
        return self.growth_per_step_bytes > 0


_CONVERTER = cattrs.Converter(forbid_extra_keys=False)


def read(data: dict) -> Memory | None:
    """The run's memory, or None (none measured, or not in the shape this trnlens reads)."""
    found: Any = data.get("memory")
    if not isinstance(found, dict):
        return None
    try:
        return _CONVERTER.structure(found, Memory)
    except (cattrs.BaseValidationError, TypeError, ValueError):
        return None


def peak_words(memory: Memory) -> str:
    """``peak 269 kB in optimizer (train.py:29)``."""
    where = f" in {memory.peak_phase}" if memory.peak_phase else ""
    line = memory.peak_line
    at = f" ({line.path}:{line.line})" if line is not None and line.path else ""
    return f"peak {units.data_size(memory.peak_bytes)}{where}{at}"


def parts_words(memory: Memory) -> str:
    """``parameters 49.8 kB · gradients 49.8 kB · ...``: what is live at the peak, by kind."""
    return " · ".join(
        f"{label} {units.data_size(memory.at_peak[kind])}"
        for kind, label in _ordered(memory.at_peak)
    )


NO_MODULE = memorypass.NO_MODULE


def made_by_words(rows: list[MadeAt] | list[MadeIn], limit: int = 4) -> str:
    """``train.py:18 temporaries 33.6 MB · train.py:17 gradients 25.2 MB``: where what is live
    at the peak was allocated (rows outside any module left out)."""
    shown = []
    for row in rows:
        where = row.module if isinstance(row, MadeIn) else f"{row.path}:{row.line}"
        if where != NO_MODULE:
            shown.append(f"{where} {KINDS.get(row.kind, row.kind)} {units.data_size(row.bytes)}")
    rest = len(shown) - limit
    return " · ".join(shown[:limit] + ([f"… {rest} more"] if rest > 0 else []))


def keepers_words(memory: Memory, limit: int = 5) -> str:
    """``model.1 8.2 KB · model.2 2.0 KB · … 3 more``: the largest keepers of activations."""
    shown = [f"{k.module} {units.data_size(k.bytes)}" for k in memory.activations_by_module[:limit]]
    rest = len(memory.activations_by_module) - limit
    return " · ".join(shown + ([f"… {rest} more"] if rest > 0 else []))


def growth_words(bytes_per_step: int, steps: int) -> str:
    """``memory grows 4.0 KB a step here: ...``: the loud part of a growth finding."""
    return (
        f"memory grows {units.data_size(bytes_per_step)} a step here: what this line allocates "
        f"is still held when later steps end (measured over {steps} steps)"
    )


GROWTH_ADVICE = (
    "a tensor kept in a list or dict, or a loss summed with its graph, stays alive: keep a "
    "detached copy (`.detach()`), or clear what is kept"
)


def out_of_memory_words(error: dict | None) -> str | None:
    """``live on cpu when it failed: parameters 16.6 KB · other 256 B``: what held the memory
    when an allocation failed (agent/outofmemory.py), or None (not an out-of-memory failure, or
    not read)."""
    found = error.get("out_of_memory") if isinstance(error, dict) else None
    if not isinstance(found, dict) or not isinstance(found.get("live"), dict):
        return None
    live = found["live"]
    parts = {kind: size for kind, size in live.items() if isinstance(size, int)}
    said = " · ".join(f"{label} {units.data_size(parts[kind])}" for kind, label in _ordered(parts))
    return f"live on {found.get('device')} when it failed: {said or 'nothing'}"


def _ordered(parts: dict[str, int]) -> list[tuple[str, str]]:
    known = [(kind, label) for kind, label in KINDS.items() if parts.get(kind)]
    return known + [(kind, kind) for kind in parts if kind not in KINDS and parts[kind]]


def xla_memory_words(xla: dict | None) -> list[str]:
    """An XLA run's device memory (agent/xla/memory.py): what the step holds on the device
    between steps, by kind, and the allocator's figures or why there are none. [] without."""
    found = xla.get("memory") if isinstance(xla, dict) else None
    if not isinstance(found, dict) or not isinstance(found.get("held_bytes"), dict):
        return []
    held = {k: v for k, v in found["held_bytes"].items() if isinstance(v, int)}
    parts = " · ".join(
        f"{KINDS.get(kind, kind)} {units.data_size(held[kind])}"
        for kind in ("parameters", "gradients", "optimizer_state", "buffers")
        if held.get(kind)
    )
    total = units.data_size(sum(held.values()))
    out = [
        f"held on the device between steps: {parts or 'nothing'} ({total} in all; the step's "
        "activations and temporaries come and go above it)"
    ]
    allocator = found.get("allocator")
    if isinstance(allocator, dict) and allocator:
        used, limit = allocator.get("bytes_used"), allocator.get("bytes_limit")
        peak = allocator.get("peak_bytes_used")
        said = " ".join(p for p in (
            f"{units.data_size(used)} in use" if used is not None else "",
            f"of {units.data_size(limit)}" if limit is not None else "",
        ) if p)  # fmt: skip
        if peak is not None:
            said = (
                f"{said}, peak {units.data_size(peak)}" if said else f"peak {units.data_size(peak)}"
            )
        text = said or ", ".join(f"{k} {v}" for k, v in allocator.items())
        out.append(f"the device's allocator: {text}")
    elif found.get("allocator_note"):
        out.append(f"the device's allocator: {found['allocator_note']}")
    return out
