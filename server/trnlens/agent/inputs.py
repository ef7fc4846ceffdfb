"""Arguments for the profiled function: from its defaults or a ``# trnlens: inputs=NAME`` factory.

Nothing is guessed silently: when neither is there, the error says exactly what to write.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .sources import Definition


@dataclass
class Inputs:
    args: tuple
    kwargs: dict
    instance: Any = None  # the nn.Module (or other object) a class or method target runs on
    description: dict = field(default_factory=dict)


def missing_inputs_message(definition: Definition, path: str) -> str:
    name = definition.qualname.replace(".", "_").lower()
    keyword = "class" if definition.kind == "class" else "def"
    short = definition.qualname.split(".")[-1]
    if definition.kind == "function":
        params = ", ".join(definition.params)
        example = "    return (torch.randn(4, 512, 2048), torch.randn(2048))  # one per parameter"
        head = f"{definition.qualname}({params}) needs arguments and not all of them have defaults"
    else:
        cls = definition.qualname.split(".")[0]
        example = f"    return {cls}(...), (torch.randn(4, 512, 2048),)  # (instance, args)"
        head = f"{definition.qualname} needs an instance and arguments"
    return (
        f"{head}. Add a factory to {path} and name it in a directive on the line directly "
        f"above the {keyword}:\n\n"
        f"def {name}_inputs():\n{example}\n\n"
        f"# trnlens: inputs={name}_inputs\n"
        f"{keyword} {short}..."
    )


def call_factory(module, name: str, device, relpath: str, is_project_file, project_relpath):
    factory = getattr(module, name, None)
    if factory is None or not callable(factory):
        raise errors.usage(
            f"'# trnlens: inputs={name}' names no callable in {relpath}: define "
            f"`def {name}():` returning the arguments"
        )
    kwargs = {}
    try:
        if "device" in inspect.signature(factory).parameters:
            kwargs["device"] = device  # factories may build on the target device directly
    except (TypeError, ValueError):
        pass
    try:
        return factory(**kwargs)
    except (Exception, SystemExit) as exc:
        raise errors.from_user_code(exc, is_project_file, project_relpath) from None


def unpack_factory_result(value, definition: Definition, factory: str) -> Inputs:
    if definition.kind == "function":
        if (
            isinstance(value, tuple)
            and len(value) == 2
            and isinstance(value[0], (tuple, list))
            and isinstance(value[1], dict)
        ):
            return Inputs(tuple(value[0]), dict(value[1]))
        if isinstance(value, (tuple, list)):
            return Inputs(tuple(value), {})
        return Inputs((value,), {})
    if not isinstance(value, tuple) or len(value) not in (2, 3):
        raise errors.usage(
            f"inputs={factory} must return (instance, args) or (instance, args, kwargs) for "
            f"{definition.qualname}, got {type(value).__name__}"
        )
    instance, args = value[0], value[1]
    kwargs = value[2] if len(value) == 3 else {}
    if not isinstance(args, (tuple, list)):
        args = (args,)
    if not isinstance(kwargs, dict):
        raise errors.usage(f"inputs={factory}: the kwargs (third item) must be a dict")
    return Inputs(tuple(args), dict(kwargs), instance=instance)


def defaults_suffice(function) -> bool:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return False
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.default is parameter.empty:
            return False
    return True


def move(made: Inputs, device, torch) -> None:
    """The inputs onto ``device``: tensors, and nn.Modules in place (a model left on the host
    beside inputs on an XLA device failed deep in torch-xla with "Check failed: xtensor").
    Moving a module onto a device whose tensors cannot share the host's storage type (XLA)
    gives it new Parameter objects: an optimizer the factory built over the old ones would then
    update nothing, silently; each optimizer among the inputs is pointed at the new ones."""
    moved: dict[int, Any] = {}
    made.args = to_device(made.args, device, torch, moved)
    made.kwargs = to_device(made.kwargs, device, torch, moved)
    if moved:
        for optimizer in _optimizers((made.args, made.kwargs), torch):
            _repoint(optimizer, moved)


def to_device(value, device, torch, moved: dict[int, Any] | None = None):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, torch.nn.Module):
        before = list(value.parameters())
        value.to(device)
        if moved is not None:
            after = list(value.parameters())
            moved.update({id(a): b for a, b in zip(before, after, strict=True) if a is not b})
        return value
    if isinstance(value, tuple):
        return tuple(to_device(v, device, torch, moved) for v in value)
    if isinstance(value, list):
        return [to_device(v, device, torch, moved) for v in value]
    if isinstance(value, dict):
        return {k: to_device(v, device, torch, moved) for k, v in value.items()}
    return value


def _optimizers(value, torch) -> list:
    if isinstance(value, torch.optim.Optimizer):
        return [value]
    if isinstance(value, (tuple, list)):
        return [o for v in value for o in _optimizers(v, torch)]
    if isinstance(value, dict):
        return [o for v in value.values() for o in _optimizers(v, torch)]
    return []


def _repoint(optimizer, moved: dict[int, Any]) -> None:
    for group in optimizer.param_groups:
        group["params"] = [moved.get(id(p), p) for p in group["params"]]
    state = optimizer.state
    for old in [p for p in list(state) if id(p) in moved]:
        state[moved[id(old)]] = state.pop(old)


def describe(value, torch) -> Any:
    if isinstance(value, torch.Tensor):
        return {
            "shape": list(value.shape),
            "dtype": str(value.dtype).replace("torch.", ""),
            "device": str(value.device),
        }
    if isinstance(value, (tuple, list)):
        return [describe(v, torch) for v in value]
    if isinstance(value, dict):
        return {str(k): describe(v, torch) for k, v in value.items()}
    text = repr(value)
    return {"type": type(value).__name__, "repr": text if len(text) <= 80 else text[:77] + "..."}


def describe_inputs(inputs: Inputs, source: str, torch) -> dict:
    description = {
        "source": source,
        "args": describe(inputs.args, torch),
        "kwargs": describe(inputs.kwargs, torch),
    }
    if inputs.instance is not None:
        instance = inputs.instance
        description["instance"] = {"type": type(instance).__name__}
        if isinstance(instance, torch.nn.Module):
            description["instance"]["parameters"] = sum(p.numel() for p in instance.parameters())
    return description
