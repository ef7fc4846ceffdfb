"""TRN101-TRN105: host-device synchronisation and transfers inside loops.

On an accelerator every ``.item()``, ``.cpu()``, ``.tolist()`` or ``.numpy()`` waits for all
queued device work and copies back to the host; inside a training loop that serialises host and
device every step. Creating tensors from host data, or moving a tensor that never changes to the
device, inside the loop pays a host-to-device copy per iteration. These findings have no
automatic fix: the remedy (accumulate on the device, hoist out of the loop) changes the code's
structure.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from trnlens.analysis.patterns import is_float32_dtype, is_module_ref, op_call
from trnlens.analysis.rules.base import Context, Match

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
# Reductions whose result printed is a tensor (printing it syncs and copies it to the host).
_TENSOR_METHODS = frozenset({"sum", "mean", "max", "min", "norm", "std", "var", "abs", "detach"})


@dataclass(frozen=True)
class _InLoop:
    node: ast.AST
    loop: ast.AST
    stored: frozenset[str]  # names the loop (re)assigns: not loop-invariant


def _in_loops(ctx: Context) -> Iterator[_InLoop]:
    """Every node inside a loop body (or a comprehension), with its innermost loop."""

    def visit(node: ast.AST, loop: ast.AST | None, stored: frozenset[str]) -> Iterator[_InLoop]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                continue
            inner_loop, inner_stored = loop, stored
            if isinstance(child, _LOOPS + _COMPREHENSIONS):
                inner_loop = child
                inner_stored = stored | _stored(child)
            if inner_loop is not None and not _is_loop_header(child, node):
                yield _InLoop(child, inner_loop, inner_stored)
            yield from visit(child, inner_loop, inner_stored)

    for stmt in ctx.body:
        if isinstance(stmt, _SCOPES):
            continue
        if isinstance(stmt, _LOOPS):
            yield from visit(stmt, stmt, _stored(stmt))
        else:
            yield from visit(stmt, None, frozenset())


def _is_loop_header(child: ast.AST, parent: ast.AST) -> bool:
    """The iterable of a for loop runs once, not per iteration."""
    return isinstance(parent, ast.For | ast.AsyncFor) and child is parent.iter


def _stored(node: ast.AST) -> frozenset[str]:
    return frozenset(
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    )


def _method(node: ast.AST, names: set[str]) -> ast.Call | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
        and not node.args
        and not node.keywords
    ):
        return node
    return None


@dataclass
class _SyncRule:
    code: str
    name: str
    summary: str
    triggers: frozenset[str]

    def check(self, ctx: Context) -> Iterator[Match]:
        if not ctx.info.imports_torch:
            return  # `.numpy()` on a TensorFlow or NumPy value is not a device sync
        for hit in _in_loops(ctx):
            message = self.message(ctx, hit)
            if message is not None:
                yield Match(code=self.code, message=message, node=hit.node, ops=[hit.node])

    def message(self, ctx: Context, hit: _InLoop) -> str | None:
        raise NotImplementedError


class ItemInLoop(_SyncRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN101",
            "item-in-loop",
            "`.item()` in a loop: a host-device sync per iteration",
            frozenset({"item"}),
        )

    def message(self, ctx: Context, hit: _InLoop) -> str | None:
        if _method(hit.node, {"item"}) is None:
            return None
        return (
            "`.item()` in a loop waits for the device and copies to the host every iteration; "
            "accumulate on the device (e.g. `total += loss.detach()`) and call `.item()` once "
            "after the loop"
        )


class CopyToHostInLoop(_SyncRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN102",
            "host-copy-in-loop",
            "`.cpu()` / `.numpy()` / `.tolist()` in a loop: a sync and a copy per iteration",
            frozenset({"cpu", "numpy", "tolist"}),
        )

    def message(self, ctx: Context, hit: _InLoop) -> str | None:
        call = _method(hit.node, {"cpu", "numpy", "tolist"})
        if call is None:
            return None
        if isinstance(call.func.value, ast.Call) and _method(call.func.value, {"cpu"}):  # type: ignore[attr-defined]
            return None  # `.cpu().numpy()`: reported once, on the `.cpu()`
        name = call.func.attr  # type: ignore[attr-defined]
        return (
            f"`.{name}()` in a loop synchronises with the device and copies to the host every "
            "iteration; collect results on the device and copy once after the loop"
        )


class PrintTensorInLoop(_SyncRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN103",
            "print-tensor-in-loop",
            "printing a tensor in a loop: a sync and a copy per iteration",
            frozenset({"print"}),
        )

    def message(self, ctx: Context, hit: _InLoop) -> str | None:
        node = hit.node
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            return None
        if node.func.id != "print":
            return None
        values: list[ast.expr] = []
        for arg in node.args:
            if isinstance(arg, ast.JoinedStr):
                values.extend(v.value for v in arg.values if isinstance(v, ast.FormattedValue))
            else:
                values.append(arg)
        if not any(self._is_tensor(ctx, v) for v in values):
            return None
        return (
            "printing a tensor in a loop synchronises with the device and copies it to the host "
            "every iteration; print every N steps, or once after the loop"
        )

    def _is_tensor(self, ctx: Context, node: ast.expr) -> bool:
        value = ctx.flow.deref(node)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            if is_module_ref(value.func.value, ctx.info):
                return value.func.attr not in {"is_tensor", "numel", "get_default_dtype"}
            return value.func.attr in _TENSOR_METHODS
        return False


class TensorFromHostInLoop(_SyncRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN104",
            "tensor-from-host-in-loop",
            "`torch.tensor(...)` in a loop: a host-to-device copy per iteration",
            frozenset({"tensor", "as_tensor", "from_numpy"}),
        )

    def message(self, ctx: Context, hit: _InLoop) -> str | None:
        call = op_call(hit.node, {"tensor", "as_tensor", "from_numpy"}, ctx.info)
        if call is None or call.is_method:
            return None
        invariant = all(
            not (isinstance(n, ast.Name) and n.id in hit.stored)
            for arg in hit.node.args + [k.value for k in hit.node.keywords]  # type: ignore[attr-defined]
            for n in ast.walk(arg)
        )
        if invariant:
            return (
                f"`torch.{call.name}(...)` builds the same tensor from host data every iteration "
                "(one host-to-device copy each); create it once before the loop"
            )
        return (
            f"`torch.{call.name}(...)` in a loop copies host data to the device every iteration; "
            "keep the data on the device, or batch the copies"
        )


class InvariantToDeviceInLoop(_SyncRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN105",
            "invariant-to-device-in-loop",
            "moving an unchanging tensor to the device in every iteration",
            frozenset({"to", "cuda"}),
        )

    def message(self, ctx: Context, hit: _InLoop) -> str | None:
        node = hit.node
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            return None
        if node.func.attr not in {"to", "cuda"}:
            return None
        if node.func.attr == "to" and (
            not node.args or is_float32_dtype(node.args[0]) or _is_dtype(node.args[0])
        ):
            return None  # a cast, not a transfer
        receiver = node.func.value
        names = [n.id for n in ast.walk(receiver) if isinstance(n, ast.Name)]
        if not names or any(n in hit.stored for n in names):
            return None  # the loop's own data: moving it is the point
        if isinstance(receiver, ast.Name) and receiver.id in {"self", "model"}:
            return None
        return (
            f"`{ast.unparse(receiver)}` does not change in the loop but is moved to the device "
            "every iteration (a host-to-device copy each time); move it once before the loop"
        )


def _is_dtype(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return text.startswith(("torch.float", "torch.bfloat", "torch.int", "torch.bool", "dtype"))


SYNC_RULES = (
    ItemInLoop(),
    CopyToHostInLoop(),
    PrintTensorInLoop(),
    TensorFromHostInLoop(),
    InvariantToDeviceInLoop(),
)
