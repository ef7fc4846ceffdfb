"""An out-of-memory failure read as what it is (issue 41, point 4): the bytes the allocation
asked for, the module whose forward was running, and what was live when it failed, by kind.

A traceback says where; what a user needs to act is how much was asked for, inside which module,
and what already held the memory (the parameters, their gradients, the optimizer's state, or
the rest: activations, temporaries, inputs). The allocators say it in words of their own:

- Python's ``MemoryError`` (a list of buffers that outgrew the machine, or the address-space cap);
- the CPU's (``DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes``; also
  what an address-space cap, ``TRNLENS_MEMORY_LIMIT_MB``, makes of a large tensor);
- CUDA's caching allocator (``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate
  2.00 GiB``);
- XLA's (``RESOURCE_EXHAUSTED``) and the Neuron runtime's (``out of memory``): recognised by their
  words, untested here (no device); what was live is not read there (their tensors' storage is
  the device runtime's).

What was live is read when the failure is caught: every tensor the process still holds on that
device (``gc``), each storage once, sorted by what holds it. The failed call's frames are
still on the traceback, so what their variables hold counts, as ``other``.
"""

from __future__ import annotations

import gc
import re
from typing import Any

_CPU = re.compile(r"(?:can't allocate memory|not enough memory): you tried to allocate (\d+) bytes")
_CUDA = re.compile(r"Tried to allocate ([\d.]+) (B|KiB|MiB|GiB|TiB)")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_DEVICE_WORDS = (("RESOURCE_EXHAUSTED", "xla"), ("CUDA", "cuda"), ("NRT", "neuron"))


def read(exc: BaseException, modules: dict[int, str]) -> dict[str, Any] | None:
    """The failure's figures, or None when it is not an out-of-memory failure. ``modules``: the
    step's modules' names by ``id``."""
    text = str(exc)
    cpu = _CPU.search(text)
    cuda = _CUDA.search(text)
    if not (
        cpu
        or cuda
        or isinstance(exc, MemoryError)  # Python's own allocations (a list of buffers)
        or type(exc).__name__ == "OutOfMemoryError"
        or "RESOURCE_EXHAUSTED" in text
        or "out of memory" in text.lower()
    ):
        return None
    device = next((d for words, d in _DEVICE_WORDS if words in text), "cpu")
    if cpu:
        requested: int | None = int(cpu.group(1))
    elif cuda:
        requested = int(float(cuda.group(1)) * _UNITS[cuda.group(2)])
    else:
        requested = None
    return {
        "device": device,
        "requested_bytes": requested,
        "module": _module(exc, modules),
        "live": _live_or_none(device) if device in ("cpu", "cuda") else None,
    }


def _live_or_none(device: str) -> dict[str, int] | None:
    try:
        return _live(device)
    except MemoryError:  # still none to spare: what was live stays unread
        return None


def words(found: dict[str, Any]) -> str:
    """The failure's message: ``out of memory on cpu in model.0 (Wide): the allocation asked for
    281,474,976,710,656 bytes``."""
    where = f" in {found['module']}" if found.get("module") else ""
    asked = found.get("requested_bytes")
    said = f": the allocation asked for {asked:,} bytes" if asked is not None else ""
    return f"out of memory on {found['device']}{where}{said}"


def _module(exc: BaseException, modules: dict[int, str]) -> str | None:
    """The innermost module whose ``forward`` was running when the allocation failed."""
    import torch

    trace = exc.__traceback__
    found = None
    while trace is not None:
        frame = trace.tb_frame
        owner = frame.f_locals.get("self") if frame.f_code.co_name == "forward" else None
        if isinstance(owner, torch.nn.Module):
            name = modules.get(id(owner))
            found = f"{name} ({type(owner).__name__})" if name else type(owner).__name__
        trace = trace.tb_next
    return found


def _live(device: str) -> dict[str, int]:
    """Bytes of the tensors alive on ``device``, by what holds them, each storage once."""
    import torch

    objects = gc.get_objects()
    optimizer_state: set[int] = set()
    gradients: set[int] = set()
    for obj in objects:
        if isinstance(obj, torch.optim.Optimizer):
            for state in obj.state.values():
                optimizer_state.update(id(v) for v in state.values() if torch.is_tensor(v))
        elif isinstance(obj, torch.nn.Parameter) and obj.grad is not None:
            gradients.add(id(obj.grad))
    live: dict[str, int] = {}
    seen: set[int] = set()
    for obj in objects:
        if not torch.is_tensor(obj) or obj.device.type != device:
            continue
        try:
            storage = obj.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
        except (RuntimeError, NotImplementedError):  # a tensor with no storage of its own
            continue
        if key in seen or size == 0:
            continue
        seen.add(key)
        if isinstance(obj, torch.nn.Parameter):
            kind = "parameters"
        elif id(obj) in gradients:
            kind = "gradients"
        elif id(obj) in optimizer_state:
            kind = "optimizer_state"
        else:
            kind = "other"
        live[kind] = live.get(kind, 0) + size
    return live
