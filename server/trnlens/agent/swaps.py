"""Module swaps: a library class's method replaced on this run's instances, its source untouched.

A ``compare --fix`` variant may carry ``module_swaps``: ``[{"type_path", "method", "source"}]``
(or ``{"type_path", "kind": "checkpoint"}``: activation checkpointing, checkpointing.py),
where ``source`` is the fixed method as text (the static analysis' fix of the library's code,
made on the server). Each is exec'd in a copy of the globals of the module that defines the class
(so it sees the names the library's code sees) and set as an instance attribute on every
``nn.Module`` of exactly that class reachable from the run's inputs: the instance, the arguments,
containers of them, and the profiled module's globals. Nothing is written to the library's files
or its class; :func:`undo` puts every instance back (a model held in a module global outlives
the variant in a warm agent).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterable, Iterator
from typing import Any

from . import checkpointing, errors, loader

_MISSING = object()


def apply(swaps: list[dict], roots: Iterable[object], torch, label: str) -> list[tuple]:
    """Applies every swap; returns what :func:`undo` needs. A usage error when a class cannot
    be found or no instance of it is reachable (the variant would measure nothing new)."""
    done: list[tuple] = []
    modules = list(_modules(roots, torch))
    try:
        for swap in swaps:
            cls, home = _resolve(str(swap.get("type_path") or ""))
            method = str(swap.get("method") or "forward")
            replacement = _replacement(swap, home, method, label)
            hits = [m for m in modules if type(m) is cls]
            if not hits:
                raise errors.usage(
                    f"variant {label!r}: no {swap['type_path']} instance is reachable from the "
                    "inputs (the instance, the arguments, or the module's globals): nothing to swap"
                )
            for module in hits:
                bound = types.MethodType(replacement, module)
                done.append((module, method, module.__dict__.get(method, _MISSING), bound))
                setattr(module, method, bound)
    except BaseException:
        undo(done)
        raise
    return done


def _replacement(swap: dict, home: types.ModuleType, method: str, label: str) -> Any:
    """The method to set: activation checkpointing (checkpointing.py), or the swap's source
    exec'd in the globals of the class's module."""
    if swap.get("kind") == "checkpoint":
        return checkpointing.forward
    namespace = loader.exec_variant_source(home, str(swap.get("source") or ""), label)
    replacement = namespace.get(method)
    if not callable(replacement) or replacement is getattr(home, method, None):
        raise errors.usage(f"variant {label!r}: its swap source defines no {method!r}")
    return replacement


def redo(done: list[tuple]) -> None:
    """Puts back what :func:`apply` did and :func:`undo` took away: a comparison's interleaved
    rounds run after every variant's own passes, each round call of a swapped variant between a
    ``redo`` and an ``undo`` (else its rounds would time the library's own code)."""
    for module, method, _, bound in done:
        setattr(module, method, bound)


def undo(done: list[tuple]) -> None:
    for module, method, old, _ in reversed(done):
        if old is _MISSING:
            module.__dict__.pop(method, None)
        else:
            setattr(module, method, old)


def count(done: list[tuple]) -> int:
    return len({id(module) for module, *_ in done})


def _resolve(type_path: str) -> tuple[type, types.ModuleType]:
    """The class at ``pkg.module.Class`` (or ``pkg.module.Outer.Inner``) and its module."""
    parts = type_path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:cut])
        home = sys.modules.get(name)
        if home is None:
            try:
                home = importlib.import_module(name)
            except ImportError:
                continue
        obj: object = home
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        if isinstance(obj, type):
            return obj, home
    raise errors.usage(f"module swap: cannot find the class {type_path!r} in this interpreter")


def _modules(roots: Iterable[object], torch) -> Iterator[object]:
    """Every nn.Module reachable from ``roots`` through containers and submodules, once."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, torch.nn.Module):
            for module in value.modules():
                if id(module) not in seen or module is value:
                    seen.add(id(module))
                    yield module
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
