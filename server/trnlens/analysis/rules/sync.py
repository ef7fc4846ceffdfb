"""TRN101-TRN106: host-device synchronisation and transfers inside loops.

On an accelerator every ``.item()``, ``.cpu()``, ``.tolist()`` or ``.numpy()`` waits for all
queued device work and copies back to the host; inside a training loop that serialises host and
device every step. Creating tensors from host data, or moving a tensor that never changes to the
device, inside the loop pays a host-to-device copy per iteration. These findings have no
automatic fix: the remedy (accumulate on the device, hoist out of the loop) changes the code's
structure.

A finding here is a hazard, not a measured cost: its severity is information (a hint for a sync
the code needs, whose value decides a branch or a size) until a profile of the function measured
it as costly (see ``lsp.measured``). Values visibly on the host, casts and guarded one-off work
are not reported (``rules.placement``); docs/rules.md has the precision measured on two model
libraries.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar, cast

from trnlens.analysis.patterns import dotted, is_module_ref, op_call
from trnlens.analysis.rules.base import LOOP_SCOPE, Context, Match
from trnlens.analysis.rules.cadence import (
    feeds_logging,
    for_checkpoint,
    periodic_guard,
    said_to_offload,
)
from trnlens.analysis.rules.devices import (
    SAME_PLACE,
    assigned_values,
    device_target,
    factory_device,
    host_needs,
    names_cpu,
    on_device,
    on_host,
)
from trnlens.analysis.walk import walk

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
# The claim of a sync whose value the host needs (reported as a hint, not a hazard).
NEEDED = "needed"
# The claim of a sync that runs every N iterations (under `if step % n == 0:`): a hint.
PERIODIC = "periodic"
# Reductions whose result printed is a tensor (printing it syncs and copies it to the host).
_TENSOR_METHODS = frozenset({"sum", "mean", "max", "min", "norm", "std", "var", "abs", "detach"})


@dataclass(frozen=True)
class _InLoop:
    node: ast.AST
    loop: ast.AST
    stored: frozenset[str]  # names the loop (re)assigns: not loop-invariant

    def changes(self, root: str) -> bool:
        """Can the loop body rebind or modify what ``root`` refers to? A store to the name, an
        attribute or item store on it, a call that receives it, or a method called on it."""
        if root in self.stored:
            return True
        return root in _changed(self.loop)


def _in_loops(ctx: Context) -> Iterator[_InLoop]:
    """Every node inside a loop body (or a comprehension), with its innermost loop: found once
    per function for all the sync rules, and not looked for where the function has no loop."""
    found = cast("list[_InLoop] | None", ctx.memo.get("sync.in_loops"))
    if found is None:
        has_loop = any(type(node) in _LOOP_TYPES for node in ctx.nodes)
        hits = _find_in_loops(ctx) if has_loop else iter(())
        # A loop over a literal list of a few values is no per-step cost for any sync rule.
        found = [hit for hit in hits if not _few_fixed_iterations(hit.loop)]
        ctx.memo["sync.in_loops"] = found
    return iter(found)


_LOOP_TYPES = frozenset(_LOOPS + _COMPREHENSIONS)


def _find_in_loops(ctx: Context) -> Iterator[_InLoop]:

    heads: set[int] = set()  # comprehension heads, visited with the code around them
    # Rows where a loop or comprehension starts: outside every loop, a subtree whose rows hold
    # none of them yields nothing and is not walked (most of a function's statements).
    starts = sorted(n.lineno for n in ctx.nodes if type(n) in _LOOP_TYPES)  # type: ignore[attr-defined]

    def holds_a_loop(node: ast.AST) -> bool:
        first = getattr(node, "lineno", None)
        if first is None:
            return True
        at = bisect_left(starts, first)
        return at < len(starts) and starts[at] <= (node.end_lineno or first)  # type: ignore[attr-defined]

    def visit(
        node: ast.AST,
        loop: ast.AST | None,
        stored: frozenset[str],
        outer: tuple[ast.AST, frozenset[str]] | None = None,
    ) -> Iterator[_InLoop]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES) or id(child) in heads:
                continue
            if loop is None and outer is None and not holds_a_loop(child):
                continue
            if isinstance(child, _COMPREHENSIONS):
                # The outermost iterable of a comprehension is evaluated once, where the
                # comprehension stands (as the iterable of a `for` is): not per element.
                head = child.generators[0].iter
                heads.add(id(head))
                if loop is not None:
                    yield _InLoop(head, loop, stored)
                yield from visit(head, loop, stored, outer=outer)
            if _is_loop_header(child, node):
                # The iterable is evaluated once per run of this loop: it belongs to the loop
                # around it (if any), not to this one.
                if outer is not None:
                    yield _InLoop(child, outer[0], outer[1])
                around, around_stored = outer or (None, frozenset())
                yield from visit(child, around, around_stored, outer=None)
                continue
            inner_loop, inner_stored = loop, stored
            if isinstance(child, _LOOPS + _COMPREHENSIONS):
                inner_loop = child
                inner_stored = stored | _stored(child)
            if inner_loop is not None:
                yield _InLoop(child, inner_loop, inner_stored)
            next_outer = (loop, stored) if loop is not None else None
            if isinstance(child, _LOOPS + _COMPREHENSIONS):
                yield from visit(child, inner_loop, inner_stored, outer=next_outer)
            else:
                yield from visit(child, inner_loop, inner_stored, outer=outer)

    for stmt in ctx.body:
        if isinstance(stmt, _SCOPES) or not holds_a_loop(stmt):
            continue
        if isinstance(stmt, _LOOPS):
            yield from visit(stmt, stmt, _stored(stmt))
        else:
            yield from visit(stmt, None, frozenset())


def _is_loop_header(child: ast.AST, parent: ast.AST) -> bool:
    """The iterable of a for loop runs once, not per iteration."""
    return isinstance(parent, ast.For | ast.AsyncFor) and child is parent.iter


# Methods that read a tensor without changing anything it refers to.
_READS = SAME_PLACE | {"to", "cuda", "cpu", "item", "size", "dim", "tolist", "numel", "type"}


@lru_cache(maxsize=256)  # AST nodes hash by identity; one loop is asked about many times
def _changed(loop: ast.AST) -> frozenset[str]:
    found: set[str] = set()
    for node in walk(loop):
        if isinstance(node, ast.Attribute | ast.Subscript) and isinstance(node.ctx, ast.Store):
            found.update(_root_names(node))
        elif isinstance(node, ast.Call) and not _reads_only(node.func):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Name | ast.Starred):
                    found.update(_root_names(arg))
            if isinstance(node.func, ast.Attribute):
                found.update(_root_names(node.func.value))
    return frozenset(found)


def _reads_only(func: ast.expr) -> bool:
    """A call that changes neither its receiver nor its arguments: a reading tensor method, or a
    torch / math function that is not in place (``torch.cat(xs)``, not ``torch.add_(...)``)."""
    if isinstance(func, ast.Attribute) and func.attr in _READS:
        return True
    name = dotted(func) or ""
    head = name.split(".")[0]
    return head in {"torch", "F", "math", "np", "numpy", "len", "range", "enumerate", "zip"} and (
        not name.endswith("_")
    )


def _free_names(node: ast.AST, ctx: Context) -> list[str]:
    """Names ``node`` reads, modules (torch, math, numpy) left out."""
    modules = ctx.info.torch | ctx.info.functional | {"math", "np", "numpy"}
    return [n.id for n in walk(node) if isinstance(n, ast.Name) and n.id not in modules]


def _root_names(node: ast.AST) -> list[str]:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Starred):
        node = node.value
    return [node.id] if isinstance(node, ast.Name) else []


def _stored(node: ast.AST) -> frozenset[str]:
    return frozenset(
        n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
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
    scope: ClassVar[str] = LOOP_SCOPE  # found only in loops of modules importing torch (``check``)

    def check(self, ctx: Context) -> Iterator[Match]:
        if not ctx.info.imports_torch:
            return  # `.numpy()` on a TensorFlow or NumPy value is not a device sync
        if _traced_for_export(ctx):
            return
        for hit in _in_loops(ctx):
            said = self.message(ctx, hit)
            if said is None:
                continue
            message, claim = said if isinstance(said, tuple) else (said, None)
            yield Match(
                code=self.code,
                message=message,
                node=hit.node,
                ops=[hit.node],
                severity="hint" if claim in {NEEDED, PERIODIC} else "info",
                claim=claim,
            )

    def message(self, ctx: Context, hit: _InLoop) -> str | tuple[str, str | None] | None:
        raise NotImplementedError


def _traced_for_export(ctx: Context) -> bool:
    """A function that calls ``torch._check(...)`` is written to be traced (torch.export,
    torch.compile): there ``.item()`` gives an unbacked SymInt the checks bound, and nothing
    waits for a device at run time (torchtune's ``_export`` position embeddings)."""
    if "_check" not in ctx.names:
        return False
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr.startswith("_check")
        and is_module_ref(n.func.value, ctx.info)
        for n in ctx.nodes
    )


def _few_fixed_iterations(loop: ast.AST) -> bool:
    """``for data in [even, odd]:``: a loop over a literal list of a few values runs that many
    times, not per step or per element of data; a sync there is not a per-iteration cost."""
    return (
        isinstance(loop, ast.For | ast.AsyncFor)
        and isinstance(loop.iter, ast.List | ast.Tuple)
        and len(loop.iter.elts) <= 4
        and not any(isinstance(e, ast.Starred) for e in loop.iter.elts)
    )


class ItemInLoop(_SyncRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN101",
            "item-in-loop",
            "`.item()` in a loop: a host-device sync per iteration",
            frozenset({"item"}),
        )

    def message(self, ctx: Context, hit: _InLoop) -> str | tuple[str, str | None] | None:
        call = _method(hit.node, {"item"})
        if call is None or on_host(call.func.value, ctx):  # type: ignore[attr-defined]
            return None  # `.item()` of a host tensor (`.cpu()`'s result...) is no device sync
        guard = periodic_guard(call, ctx, hit.loop)
        how_often = _how_often(ctx, guard)
        if host_needs(call, ctx, hit.loop):
            return (
                f"`.item()` in a loop waits for the device {how_often}, and the code needs "
                "the value on the host (it decides a branch, a slice or a size): a sync the code "
                "needs; profile the function to see whether it costs enough to restructure",
                NEEDED,
            )
        again = _read_again(call, ctx, hit.loop)
        if again == NEEDED:
            return (
                f"`.item()` reads a value the loop also reads (`{ctx.text(call)}`) to decide a "
                "branch, so one sync per iteration is needed anyway; read it once and reuse the "
                "Python value (one read instead of two)"
            )
        if again is not None:
            return (
                f"`.item()` reads a value the loop reads again (`{ctx.text(call)}`): two syncs "
                "where one would do; read it once and reuse the Python value"
            )
        if feeds_logging(call, ctx, hit.loop):
            # under `if step % N == 0:` it already reads only on the steps that log it: say
            # what is left to do, not that
            first = "" if guard is not None else (
                "read it only on the steps that log it (`if step % log_every == 0:`), "
            )  # fmt: skip
            return (
                f"`.item()` reads a value for logging or a progress bar {how_often}: a "
                f"device sync each time; {first}gather the values into one tensor and copy "
                "them once, or start a non-blocking copy (`x.detach().to('cpu', "
                "non_blocking=True)`) and read it a step later",
                PERIODIC if guard is not None else None,
            )
        if guard is not None:
            return (
                f"`.item()` waits for the device and copies to the host {how_often}; cheap "
                "when N is large, otherwise accumulate on the device and read it less often",
                PERIODIC,
            )
        return (
            "`.item()` in a loop waits for the device and copies to the host every iteration; "
            "accumulate on the device (e.g. `total += loss.detach()`) and call `.item()` once "
            "after the loop"
        )


def _read_again(call: ast.Call, ctx: Context, loop: ast.AST) -> str | None:
    """Another ``.item()`` of the same value in the loop: NEEDED when that one decides a branch
    (``if token.item() in stop: break`` ... ``out.append(token.item())``: the host reads the
    value every iteration regardless), "again" otherwise (``math.exp(v.item())`` then
    ``log(v.item())``); None when this is the only read. Either way: read it once."""
    receiver = ast.dump(call.func.value)  # type: ignore[attr-defined]
    others = [
        other
        for other in walk(loop)
        if other is not call
        and _method(other, {"item"}) is not None
        and ast.dump(other.func.value) == receiver  # type: ignore[attr-defined]
    ]
    if not others:
        return None
    return NEEDED if any(host_needs(o, ctx, loop) for o in others) else "again"


def _how_often(ctx: Context, guard: ast.expr | None) -> str:
    if guard is None:
        return "every iteration"
    return f"every N iterations (under `if {' '.join(ctx.text(guard).split())}:`)"


class CopyToHostInLoop(_SyncRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN102",
            "host-copy-in-loop",
            "`.cpu()` / `.numpy()` / `.tolist()` in a loop: a sync and a copy per iteration",
            frozenset({"cpu", "numpy", "tolist", "to"}),
        )

    def message(self, ctx: Context, hit: _InLoop) -> str | tuple[str, str | None] | None:
        call = _method(hit.node, {"cpu", "numpy", "tolist"}) or _to_host(hit.node)
        if call is None:
            return None
        if on_host(call.func.value, ctx):  # type: ignore[attr-defined]
            return None  # `.cpu().permute(...).numpy()`: reported once, on the `.cpu()`
        if _copies_each_element(call, hit) or for_checkpoint(call, ctx, hit.loop):
            return None  # a checkpoint saved or loaded: each tensor copied once, kept
        if _result_discarded(call, ctx) or said_to_offload(call, ctx):
            return None  # `component.to("cpu")`: a module moved; `# offload to cpu`: on purpose
        spelled = _spelled(ctx, call)
        guard = periodic_guard(call, ctx, hit.loop)
        if guard is not None:
            return (
                f"`{spelled}` synchronises with the device and copies to the host "
                f"{_how_often(ctx, guard)}, not every iteration; cheap when N is large",
                PERIODIC,
            )
        return (
            f"`{spelled}` in a loop synchronises with the device and copies to the host every "
            "iteration; collect results on the device and copy once after the loop"
        )


def _result_discarded(call: ast.Call, ctx: Context) -> bool:
    """``component.to("cpu")`` as a statement: a tensor's copy would be lost, so the receiver is
    a module moving its parameters (an offload), not a tensor read by the host."""
    moves = call.func.attr in {"to", "cpu"}  # type: ignore[attr-defined]
    return moves and isinstance(ctx.parents.get(id(call)), ast.Expr)


def _spelled(ctx: Context, call: ast.Call) -> str:
    """``.cpu()``, ``.to("cpu")``: the copying method as written, without its receiver."""
    args = [ctx.text(a) for a in call.args]
    args += [f"{k.arg}={ctx.text(k.value)}" for k in call.keywords]
    return f".{call.func.attr}({', '.join(args)})"  # type: ignore[attr-defined]


def _to_host(node: ast.AST) -> ast.Call | None:
    """``.to("cpu")``, ``.to(torch.device("cpu"))``, ``.to(device="cpu")``: a device-to-host copy
    spelled as a move (``non_blocking=True`` aside: that copy does not wait)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    if node.func.attr != "to" or any(
        k.arg == "non_blocking" and not (isinstance(k.value, ast.Constant) and not k.value.value)
        for k in node.keywords
    ):
        return None
    device = next((k.value for k in node.keywords if k.arg == "device"), None)
    target = device if device is not None else (node.args[0] if node.args else None)
    return node if names_cpu(target) else None


def _copies_each_element(call: ast.Call, hit: _InLoop) -> bool:
    """``{k: v.cpu() for k, v in state.items()}``: a comprehension copying each of its own
    elements to the host once. The copy is what it is for (a checkpoint, a backup), and distinct
    tensors leave nothing to batch."""
    if not isinstance(hit.loop, _COMPREHENSIONS):
        return False
    roots = _root_names(_strip_same_place(call.func.value))  # type: ignore[attr-defined]
    targets = {
        n.id for gen in hit.loop.generators for n in walk(gen.target) if isinstance(n, ast.Name)
    }
    return bool(roots) and roots[0] in targets


def _strip_same_place(node: ast.expr) -> ast.expr:
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in SAME_PLACE
    ):
        node = node.func.value
    return node


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

    def message(self, ctx: Context, hit: _InLoop) -> str | tuple[str, str | None] | None:
        call = op_call(hit.node, {"tensor", "as_tensor", "from_numpy"}, ctx.info)
        if call is None or call.is_method:
            return None
        node: ast.Call = hit.node  # type: ignore[assignment]
        # Only a tensor made on the device, or moved there at once, is a copy per iteration:
        # `torch.tensor(x)` alone stays on the host and `torch.from_numpy` copies nothing.
        if factory_device(node, ctx) != "device" and not _moved_to_device(node, ctx):
            return None
        if _runs_once(node, ctx, hit):
            return None
        if _each_device_in_turn(node, ctx, hit):
            return None
        args = [*node.args, *(k.value for k in node.keywords)]
        invariant = not any(hit.changes(n) for arg in args for n in _free_names(arg, ctx))
        if invariant:
            return (
                f"`torch.{call.name}(...)` builds the same tensor from host data every iteration "
                "(one host-to-device copy each); create it once before the loop"
            )
        return (
            f"`torch.{call.name}(...)` in a loop copies host data to the device every iteration; "
            "keep the data on the device, or batch the copies"
        )


def _each_device_in_turn(node: ast.Call, ctx: Context, hit: _InLoop) -> bool:
    """``for i in range(n): torch.tensor(0, device=torch.device("npu", i))``: the device is the
    loop's own variable, so each iteration makes one tensor on another device (initialising
    it): nothing repeats. ``device=x.device`` names the device of a value, the same each time."""
    device = next((k.value for k in node.keywords if k.arg == "device"), None)
    if device is None or isinstance(device, ast.Attribute) or not isinstance(hit.loop, ast.For):
        return False
    targets = {n.id for n in walk(hit.loop.target) if isinstance(n, ast.Name)}
    return any(n in targets for n in _free_names(device, ctx))


def _moved_to_device(node: ast.expr, ctx: Context) -> bool:
    """``node`` is moved to an accelerator straight away: ``torch.tensor(x).view(...).to(d)``."""
    parent = ctx.parents.get(id(node))
    while isinstance(parent, ast.Attribute):
        call = ctx.parents.get(id(parent))
        if not isinstance(call, ast.Call) or call.func is not parent:
            return False
        if device_target(call) is not None:
            return True
        if parent.attr not in SAME_PLACE and parent.attr != "to":
            return False
        parent = ctx.parents.get(id(call))
    return False


def _runs_once(node: ast.AST, ctx: Context, hit: _InLoop) -> bool:
    """Inside ``if i == len(xs) - 1:`` (or ``== 0``) of a loop over ``enumerate``: once."""
    parent = ctx.parents.get(id(node))
    while parent is not None and parent is not hit.loop:
        if isinstance(parent, ast.If | ast.IfExp) and isinstance(parent.test, ast.Compare):
            test = parent.test
            if len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
                sides = [test.left, *test.comparators]
                if any(isinstance(x, ast.Name) and x.id in hit.stored for x in sides):
                    if node in _walk_list(
                        parent.body if isinstance(parent, ast.If) else parent.body
                    ):
                        return True
        parent = ctx.parents.get(id(parent))
    return False


def _walk_list(body: list[ast.stmt] | ast.expr) -> list[ast.AST]:
    roots = body if isinstance(body, list) else [body]
    return [n for root in roots for n in walk(root)]


class InvariantToDeviceInLoop(_SyncRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN105",
            "invariant-to-device-in-loop",
            "moving an unchanging tensor to the device in every iteration",
            frozenset({"to", "cuda"}),
        )

    def message(self, ctx: Context, hit: _InLoop) -> str | tuple[str, str | None] | None:
        node = hit.node
        if not (isinstance(node, ast.Call) and device_target(node) is not None):
            return None  # `.to(dtype)`, `.to(x.dtype)`, `.to(other)`: a cast, or may be one
        receiver = node.func.value  # type: ignore[attr-defined]
        source = _stored_source(receiver, ctx)
        if source is None:
            return None
        roots = _free_names(source, ctx)
        if not roots or any(hit.changes(n) for n in roots):
            return None  # the loop's own data, or something the loop may change
        if _root_names(source) and _root_names(source)[0] in {"self", "model", "cls"}:
            return None  # module state: parameters and buffers move with the module
        if on_device(source, ctx):
            return None  # made on the device already: moving it again copies nothing
        return (
            f"`{ast.unparse(receiver)}` does not change in the loop but is moved to the device "
            "every iteration (a host-to-device copy each time); move it once before the loop"
        )


def _stored_source(receiver: ast.expr, ctx: Context) -> ast.expr | None:
    """What ``receiver`` moves, when it is a stored value (a name, attribute or item) or host
    data turned into a tensor (``torch.tensor(config)``), through methods that keep it where it
    is (``.view(...)``, ``.float()``); None for anything a call makes fresh each time (a model
    loaded, a module built, ``torch.zeros(...)``: nothing there to hoist as it is)."""
    node = receiver
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in {"tensor", "as_tensor", "from_numpy"} and is_module_ref(
            node.func.value, ctx.info
        ):
            return node
        if node.func.attr not in SAME_PLACE:
            return None
        node = node.func.value
    if isinstance(node, ast.Name | ast.Attribute | ast.Subscript) and _root_names(node):
        return node
    return None


# Tensor methods whose result, tested for truth, is a one-element tensor read by the host.
_BOOL_REDUCTIONS = frozenset({"any", "all"})
# Elementwise tests and reductions: a tensor when their receiver is one.
_TENSOR_RESULTS = _BOOL_REDUCTIONS | {
    "eq", "ne", "gt", "lt", "ge", "le", "isnan", "isinf", "isfinite", "logical_and",
    "logical_or", "logical_not", "sum", "max", "min", "amax", "amin", "count_nonzero",
}  # fmt: skip
# torch functions that do not return a tensor (or return a Python value already).
_NOT_TENSORS = frozenset(
    {
        "is_tensor",
        "is_floating_point",
        "is_complex",
        "numel",
        "equal",
        "allclose",
        "is_grad_enabled",
    }
)


class ImplicitBoolInLoop(_SyncRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN106",
            "implicit-bool-sync-in-loop",
            "`if t.any():` / `while m.all():` / `bool(t)` in a loop: an implicit sync each time",
            frozenset({"any", "all", "bool"}),
        )
        # `x.any()`, `torch.all(...)`, `bool(t.any())`: never the words of prose or `all(xs)`.
        self.text_triggers = frozenset({".any(", ".all("})

    def message(self, ctx: Context, hit: _InLoop) -> str | tuple[str, str | None] | None:
        node = hit.node
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "bool"
        ):
            if len(node.args) != 1 or not _device_tensor(node.args[0], ctx):
                return None
            spelled = ctx.text(node)
        elif _may_be_tested(node, ctx) and _is_truth_test(node, ctx):
            if isinstance(node, ast.Name):
                values = assigned_values(ctx, node.id)
                if not values or not all(_device_tensor(v, ctx, names=False) for v in values):
                    return None
            elif not isinstance(node, ast.expr) or not _device_tensor(node, ctx, names=False):
                return None  # (a truth test is always an expression)
            spelled = ctx.text(node)
        else:
            return None
        how_often = _how_often(ctx, periodic_guard(node, ctx, hit.loop))
        return (
            f"`{spelled}` tested for truth turns a device tensor into a Python bool: an implicit "
            f"sync (as `.item()`) {how_often}, which the code needs to decide what to do next; "
            "test it every N iterations, copy what it tests to the host once before the loop "
            "when that is known in advance, or keep the decision on the device (`torch.where`, "
            "a mask) where the loop can go on without it",
            NEEDED,
        )


def _may_be_tested(node: ast.AST, ctx: Context) -> bool:
    """A cheap first look, before the walk up to the test: a ``.any()``/``.all()`` or torch
    call, or a name assigned one somewhere in the function (``done = x.any()``... ``if done``)."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute)
    if isinstance(node, ast.Name):
        return node.id in _reduced_names(ctx)
    return False


def _reduced_names(ctx: Context) -> frozenset[str]:
    names = ctx.memo.get("sync.reduced_names")
    if names is None:
        names = frozenset(
            t.id
            for n in ctx.nodes
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
            for t in n.targets
            if isinstance(t, ast.Name)
        )
        ctx.memo["sync.reduced_names"] = names
    return names  # type: ignore[return-value]


def _is_truth_test(node: ast.AST, ctx: Context) -> bool:
    """``node`` is what an ``if``/``while``/conditional expression/``assert`` tests, or an operand
    of ``not``/``and``/``or`` there."""
    parent = ctx.parents.get(id(node))
    while isinstance(parent, ast.BoolOp) or (
        isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)
    ):
        node, parent = parent, ctx.parents.get(id(parent))
    if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Assert) and node is parent.test:
        return True
    return isinstance(parent, ast.comprehension) and node in parent.ifs


def _device_tensor(node: ast.expr, ctx: Context, names: bool = True, depth: int = 0) -> bool:
    """Visibly a tensor not visibly on the host: ``t.any()``, ``torch.all(t)``, ``(a == b).all()``,
    a name assigned only such values. Unknown values are not tensors here."""
    if depth > 2 or on_host(node, ctx):
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if is_module_ref(node.func.value, ctx.info):
            name = node.func.attr
            if name in _NOT_TENSORS or name.startswith("is_"):
                return False
            return not (node.args and _host_operand(node.args[0], ctx))
        if node.func.attr in _BOOL_REDUCTIONS:
            return not _host_operand(node.func.value, ctx)
        if node.func.attr in _TENSOR_RESULTS:
            return _device_tensor(node.func.value, ctx, True, depth + 1)
        return False
    if isinstance(node, ast.Name) and names:
        values = assigned_values(ctx, node.id)
        return bool(values) and all(_device_tensor(v, ctx, False, depth + 1) for v in values)
    return False


def _host_operand(node: ast.expr, ctx: Context, depth: int = 0) -> bool:
    """Some operand the test reads is visibly on the host (a NumPy array, ``np.isnan(a)``, a
    tensor made without a device): ``(mask[:, i] == 0).all()`` of ``mask = np.array(img)``,
    ``torch.all(row >= n)`` of ``row = torch.zeros(n)``. Such a test is no device sync."""
    if depth > 3:
        return False
    if on_host(node, ctx):
        return True
    if isinstance(node, ast.Compare):
        return any(_host_operand(n, ctx, depth + 1) for n in [node.left, *node.comparators])
    if isinstance(node, ast.BinOp):
        return any(_host_operand(n, ctx, depth + 1) for n in (node.left, node.right))
    if isinstance(node, ast.UnaryOp):
        return _host_operand(node.operand, ctx, depth + 1)
    if isinstance(node, ast.Subscript):
        return _host_operand(node.value, ctx, depth + 1)
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        if name.split(".")[0] in {"np", "numpy", "pd", "pandas"}:
            return True
        if isinstance(node.func, ast.Attribute) and node.func.attr in _TENSOR_RESULTS | SAME_PLACE:
            return _host_operand(node.func.value, ctx, depth + 1)
    if isinstance(node, ast.Name):
        values = assigned_values(ctx, node.id)
        return bool(values) and any(_host_operand(v, ctx, depth + 1) for v in values)
    return False


SYNC_RULES = (
    ItemInLoop(),
    CopyToHostInLoop(),
    PrintTensorInLoop(),
    TensorFromHostInLoop(),
    InvariantToDeviceInLoop(),
    ImplicitBoolInLoop(),
)
