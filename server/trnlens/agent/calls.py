"""How a variant is called: its callable, the step that measuring repeats, its run mode.

The step is the user's call (inference, as written) or the call plus the backward that training
mode adds; the mode context (inference_mode or grad) wraps every pass alike. ``reseed`` gives
every variant the same RNG state before its inputs and first call.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from . import errors, inputs, loader, sources, steps
from .events import ADDED_BACKWARD_LABEL


def make_callable(
    torch: Any,
    target: Any,
    definition: sources.Definition,
    made: inputs.Inputs,
    variant: dict,
    module: types.ModuleType,
    result: dict,
    backend: Any,
    progress: Callable[[str, str], None],
) -> Callable[..., Any]:
    """What a variant calls: the function, the instance or its bound method; the variant's
    source text exec'd in its stead; wrapped in torch.compile when the variant asks."""
    source = variant.get("source")
    if source:
        import hashlib

        result["variant"]["source_hash"] = "sha256:" + hashlib.sha256(source.encode()).hexdigest()
        replaces = variant.get("replaces") or definition.qualname
        namespace = loader.exec_variant_source(module, source, result["variant"]["label"])
        name = replaces.split(".")[-1]
        if (
            name not in namespace
            or namespace[name] is getattr(module, name, None)
            and "." not in replaces
        ):
            raise errors.usage(
                f"variant {result['variant']['label']!r}: its source defines no {name!r}"
            )
        replacement = namespace[name]
        if "." in replaces:
            if made.instance is None:
                raise errors.usage(
                    f"variant replacing {replaces} needs an instance (inputs factory)"
                )
            setattr(made.instance, name, types.MethodType(replacement, made.instance))
        else:
            target = replacement
    if definition.kind == "function":
        call = target
    elif definition.kind == "class":
        if made.instance is None:
            raise errors.usage(
                f"{definition.qualname} needs (instance, args) from its inputs factory"
            )
        call = made.instance
    else:
        if made.instance is None:
            raise errors.usage(
                f"{definition.qualname} needs (instance, args) from its inputs factory"
            )
        call = getattr(made.instance, definition.qualname.split(".")[-1])
    if variant.get("compile"):
        progress("compiling", "torch.compile")
        if backend.compile_backend:
            call = torch.compile(call, backend=backend.compile_backend)
        else:
            call = torch.compile(call)
    return call


def is_compiled(obj: Any, torch: Any) -> bool:
    if hasattr(obj, "_torchdynamo_orig_callable"):
        return True
    optimized = getattr(getattr(torch, "_dynamo", None), "eval_frame", None)
    cls = getattr(optimized, "OptimizedModule", None)
    return bool(cls and isinstance(obj, cls))


def choose_mode(
    requested: str,
    call: Any,
    target: Any,
    module: types.ModuleType,
    made: inputs.Inputs,
    project: loader.Project,
    torch: Any,
) -> tuple[str, str, steps.Found | None]:
    """(mode, why, the training call found or None): auto resolves here, per variant."""
    function = getattr(call, "forward", call) if made.instance is call else call
    try:
        found = steps.find_training_call(function, module, made.instance, project, torch)
    except Exception:  # a static look must never fail the run; say so and fall back
        found = None
    if requested != "auto":
        return requested, "requested", found
    if found is not None:
        why = f"auto: calls {found.what} at {found.path}:{found.line} (a training step)"
        return "as-written", why, found
    return "inference", "auto: calls no backward or optimizer step", None


@contextmanager
def mode_context(torch: Any, mode: str, inference_mode: bool = True) -> Iterator[None]:
    """Inference runs under ``torch.inference_mode()``, or ``no_grad()`` where the backend's
    tensors cannot be inference tensors (``Backend.inference_mode``: XLA's views fail with
    "Cannot set version_counter for inference tensor")."""
    with ExitStack() as stack:
        if mode == "inference":
            stack.enter_context(torch.inference_mode() if inference_mode else torch.no_grad())
        else:
            stack.enter_context(torch.enable_grad())
        yield


def make_step(
    call: Callable[..., Any],
    made: inputs.Inputs,
    mode: str,
    torch: Any,
    project: loader.Project,
    where: tuple[str, int],
) -> Callable[[], Any]:
    is_project_file, relpath = project.is_project_file, project.relpath
    args, kwargs = made.args, made.kwargs
    if mode in ("inference", "as-written"):
        return lambda: call(*args, **kwargs)
    leaves: list[Any] = []
    if isinstance(made.instance, torch.nn.Module):
        leaves.extend(p for p in made.instance.parameters() if p.requires_grad)
    else:
        for value in tensors(args) + tensors(list(kwargs.values())):
            if value.is_floating_point() and value.is_leaf:
                value.requires_grad_(True)
                leaves.append(value)
    if not leaves:
        raise errors.usage(
            "training mode needs something to differentiate: a module with parameters, or "
            "floating-point tensor arguments"
        )

    def step():
        for leaf in leaves:
            leaf.grad = None
        out = call(*args, **kwargs)
        outs = [t for t in tensors(out) if t.requires_grad]
        if not outs:
            raise errors.usage("training mode: the function returned no tensor that requires grad")
        try:
            with torch.autograd.profiler.record_function(ADDED_BACKWARD_LABEL):
                sum(t.float().sum() for t in outs).backward()
        except Exception as exc:
            # Our backward has no project frame: name the profiled function's line instead.
            failure = errors.from_user_code(exc, is_project_file, relpath)
            failure.message += " (in the backward that training mode adds after the call)"
            if failure.path is None:
                failure.path, failure.line = where
            raise failure from None
        return out

    return step


def tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v)]
    return []


def cpu_copy(out: Any, torch: Any) -> list[Any]:
    """The output's tensors, copied to the host now: later steps may change them in place."""
    return [t.detach().to("cpu", copy=True) for t in tensors(out)]


def reseed(torch: Any) -> None:
    """The same RNG state before each variant's inputs and first call (torch's, Python's and
    numpy's where the code imported it): dropout and random inputs then agree across variants."""
    import random

    torch.manual_seed(0)
    random.seed(0)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(0)
