"""TRN301-TRN303: what cuts or recompiles an XLA graph, in code written for torch-xla (the
XLA-based torch-neuronx 2.x that optimum-neuron pins; docs/neuron.md).

On an XLA device ops only record a graph; ``torch_xla.sync()`` compiles and runs it. Anything that
needs a value on the host executes the pending graph there (the step becomes two graphs), and an
output whose shape depends on the data falls back to the CPU or makes a new graph per shape.
Reported only in modules that use torch-xla (they import ``torch_xla``, ``torch_neuronx`` or
``optimum.neuron``), as hints (severity ``info``): an XLA run of the function
(``--backend xla``) measures each one (its ``xla`` section: forced executions and CPU fallbacks at
their lines, recompilations with their cause).

- TRN301 ``nonzero`` / ``masked_select`` / ``unique`` / one-argument ``torch.where``: an output
  shape that depends on the data;
- TRN302 ``.item()`` / ``.tolist()`` / ``.numpy()`` / ``.cpu()``: a host read that executes the
  graph where it stands;
- TRN303 a Python ``if`` / ``while`` on a tensor's value: a host read that also bakes the branch
  taken into the graph.

Carried over unchanged from the other families: TRN101-TRN106 (syncs and transfers in loops: on
XLA each one is a forced execution per iteration), TRN001-TRN007 (hand-written norms and
activations: fewer IR nodes); TRN201-TRN204 stay about torch.compile'd functions.
Not reported (issue 40, the false findings' shapes on optimum-neuron 0.4.5, docs/rules.md): a
value already on the host (bound from ``.cpu()`` and the like, or named ``*cpu*``), a read right
after a sync statement, a function handed to ``xm.add_step_closure``, for TRN303 a branch that
only raises or logs, for TRN302 a read under ``if step % N == 0:``, and nothing in evaluation or
generation functions (``evaluate``, ``generate``, ``*_search``, ...): their reads are per batch
or per token by design, not a training step's cost.
Not covered statically: boolean-mask indexing (``x[x > 0]``), and shapes that change per call
(a length read from the data): the run finds both (CPU fallback at the line; recompiles with
the changed shape at the line).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from trnlens.analysis.rules.base import XLA_SCOPE, Context, Match
from trnlens.analysis.rules.graphbreaks import _VALUE_METHODS, _attr_call, _depends_on_values

SEVERITY = "info"
_DATA_SHAPED = frozenset({"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere"})
_HOST_READS = frozenset({"item", "tolist", "numpy", "cpu"})


def uses_xla(ctx: Context) -> bool:
    return ctx.info.imports_xla


# What the rules track beside the syntax (the three shapes of their false findings on
# optimum-neuron 0.4.5, docs/rules.md): a tensor already on the host, a read after the step's
# sync, code run as a step closure.
_TO_HOST = frozenset({"cpu", "numpy", "tolist", "get_last_lr"})
_SYNCS = frozenset({"sync", "mark_step", "wait_device_ops"})
_CLOSURE = re.compile(r"add_step_closure\(\s*(?:self\.)?(\w+)")
_LOGS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log",
                   "warning_once", "info_once", "print"})  # fmt: skip


def _chain(expr: ast.AST) -> Iterator[ast.AST]:
    """``expr`` and what it is read from: ``a.b(c)[0].item`` -> the call, ``a.b``, ``a``..."""
    while True:
        yield expr
        if isinstance(expr, ast.Call):
            expr = expr.func
        elif isinstance(expr, ast.Attribute | ast.Subscript):
            expr = expr.value
        else:
            return


def _to_host(expr: ast.AST) -> bool:
    """Whether ``expr`` is a host value by how it was made: ``t.cpu()``, ``.numpy()``,
    ``.to("cpu")``, a scheduler's ``get_last_lr()``, an optimizer's ``param_groups``."""
    for node in _chain(expr):
        if isinstance(node, ast.Attribute) and node.attr == "param_groups":
            return True
        call = _attr_call(node)
        if call is None:
            continue
        if call[1] in _TO_HOST:
            return True
        if (
            call[1] == "to"
            and isinstance(node, ast.Call)
            and any(isinstance(a, ast.Constant) and a.value == "cpu" for a in node.args)
        ):
            return True
    return False


def _bindings(ctx: Context) -> dict[str, list[tuple[int, bool]]]:
    """Per name this function assigns: (line, whether the value is a host value) in order."""
    memo = ctx.memo.get("xla_bindings")
    if memo is not None:
        return memo  # type: ignore[return-value]
    found: dict[str, list[tuple[int, bool]]] = {}
    ctx.memo["xla_bindings"] = found  # read while being built: names bound on earlier lines
    for node in ctx.nodes:  # in source order: a value made from a host name is a host one
        if isinstance(node, ast.Assign):
            host = _on_host(ctx, node.value)
            targets = node.targets
        elif isinstance(node, ast.comprehension):  # `for t in tensors_cpu`: each t too
            host = _on_host(ctx, node.iter)
            targets = [node.target]
        else:
            continue
        # a comprehension's name is bound before its element is read, on the same line
        line = node.lineno if isinstance(node, ast.Assign) else node.iter.lineno - 1
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    found.setdefault(name.id, []).append((line, host))
    return found


def _host_name(ctx: Context, name: str, line: int) -> bool:
    """Whether ``name`` holds a host value on ``line``: its last assignment before it made one
    (``x_cpu = t.cpu()``), or its name says so (``input_ids_cpu``)."""
    if "cpu" in name.lower():
        return True
    before = [host for at, host in _bindings(ctx).get(name, []) if at < line]
    if before and before[-1]:
        return True
    return _moved_later(ctx, name, line)


_DEVICE_WORD = re.compile(r"device|xla", re.IGNORECASE)


def _device_move(node: ast.AST) -> bool:
    """``t.to(device)``, ``t.to(xm.xla_device())``, ``t.to("xla")``, ``t.to(device=d)``; not a
    dtype's ``t.to(torch.long)`` nor ``t.to("cpu")``."""
    call = _attr_call(node)
    if call is None or call[1] != "to" or not isinstance(node, ast.Call):
        return False
    targets = [k.value for k in node.keywords if k.arg == "device"] or node.args[:1]
    for arg in targets:
        if isinstance(arg, ast.Constant):
            return isinstance(arg.value, str) and arg.value.startswith("xla")
        word = arg.func if isinstance(arg, ast.Call) else arg
        name = word.attr if isinstance(word, ast.Attribute) else getattr(word, "id", "")
        return bool(_DEVICE_WORD.search(name))
    return False


def _iterated(expr: ast.AST) -> ast.AST:
    """What a loop walks: ``enumerate(xs)`` / ``zip(xs, ...)`` / ``reversed(xs)`` walk ``xs``."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.args:
        if expr.func.id in {"enumerate", "zip", "reversed", "list", "iter"}:
            return expr.args[0]
    return expr


def _moves(ctx: Context) -> dict[str, list[int]]:
    """Per local name, the lines where this function moves it (or what it iterates over, item
    by item) to the device: ``batch = {k: v.to(device) for k, v in batch.items()}`` inside
    ``for batch in batches`` moves ``v``, ``batch`` and ``batches``."""
    memo = ctx.memo.get("xla_moves")
    if memo is not None:
        return memo  # type: ignore[return-value]
    walks: dict[str, set[str]] = {}  # loop name -> the names it is read from
    moved: list[tuple[str, int]] = []
    for node in ctx.nodes:
        if isinstance(node, ast.For | ast.comprehension):
            source = list(_chain(_iterated(node.iter)))[-1]
            if isinstance(source, ast.Name):
                for target in ast.walk(node.target):
                    if isinstance(target, ast.Name):
                        walks.setdefault(target.id, set()).add(source.id)
        elif _device_move(node):
            receiver, _ = _attr_call(node)  # type: ignore[misc]
            root = list(_chain(receiver))[-1]
            if isinstance(root, ast.Name) and root.id not in {"self", "cls"}:
                moved.append((root.id, receiver.lineno))
    found: dict[str, list[int]] = {}
    for name, line in moved:
        todo, seen = [name], set[str]()
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                found.setdefault(current, []).append(line)
                todo.extend(walks.get(current, ()))
    ctx.memo["xla_moves"] = found
    return found


def _moved_later(ctx: Context, name: str, line: int) -> bool:
    """Whether ``name`` is data this function moves to the device only after ``line`` (a batch
    before its ``.to(device)``: data preparation reads host tensors). Not when a loop holds both
    lines: from its second iteration on, the value was moved."""
    moves = _moves(ctx).get(name)
    if not moves or min(moves) <= line:
        return False
    return not any(_loop_holds(ctx, line, at) for at in moves)


def _loop_holds(ctx: Context, first: int, second: int) -> bool:
    return any(
        isinstance(node, ast.For | ast.While | ast.AsyncFor)
        and node.lineno <= first <= (node.end_lineno or node.lineno)
        and node.lineno <= second <= (node.end_lineno or node.lineno)
        for node in ctx.nodes
    )


def _on_host(ctx: Context, expr: ast.AST) -> bool:
    if _to_host(expr):
        return True
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.args:
        if expr.func.id in _HOST_REDUCTIONS:  # `sum(t for t in host_batches)`
            return all(_on_host(ctx, arg) for arg in expr.args)
    if isinstance(expr, ast.ListComp | ast.GeneratorExp | ast.SetComp):
        return _element_on_host(ctx, expr)
    root = list(_chain(expr))[-1]
    line = getattr(expr, "lineno", 0)
    return isinstance(root, ast.Name) and _host_name(ctx, root.id, line)


_HOST_REDUCTIONS = frozenset({"sum", "max", "min"})


def _element_on_host(ctx: Context, comp: ast.ListComp | ast.GeneratorExp | ast.SetComp) -> bool:
    """A comprehension's element made from its own loop name reads what that loop iterates:
    ``[b["labels"].sum() for b in batches]`` is on the host when ``batches`` is."""
    read = {n.id for n in ast.walk(comp.elt) if isinstance(n, ast.Name)}
    for gen in comp.generators:
        if any(isinstance(n, ast.Name) and n.id in read for n in ast.walk(gen.target)):
            return _on_host(ctx, gen.iter)
    return _on_host(ctx, comp.elt)


def _is_sync(node: ast.AST) -> bool:
    call = _attr_call(node)
    return call is not None and call[1] in _SYNCS


def _after_sync(ctx: Context, line: int) -> bool:
    """Whether the statement just before the read's is a sync (``torch_xla.sync()``,
    ``xm.mark_step()``, ``xm.wait_device_ops()``): the graph has just run and nothing new is
    pending. A read that opens its block looks before the compound statement holding it, but not
    out of a loop (the iteration before traced its own ops). A statement between the sync and
    the read may trace new ops: then the read cuts a graph again, and is reported."""
    path: list[tuple[list[ast.stmt], int]] = []  # (block, index of the statement holding line)
    body: list[ast.stmt] = ctx.body
    while body:
        at = next((i for i, s in enumerate(body) if _holds([s], line)), None)
        if at is None:
            break
        path.append((body, at))
        body = next((block for block in _blocks(body[at]) if _holds(block, line)), [])
    for block, at in reversed(path):
        if at > 0:
            return any(_is_sync(n) for n in ast.walk(block[at - 1]))
        parent = next((b[i] for b, i in path if block in _blocks(b[i])), None)
        if parent is None or isinstance(parent, ast.For | ast.While | ast.AsyncFor):
            return False
    return False


def _holds(block: list[ast.stmt], line: int) -> bool:
    return any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in block)


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    found = [getattr(stmt, name) for name in ("body", "orelse", "finalbody")
             if isinstance(getattr(stmt, name, None), list)]  # fmt: skip
    found.extend(handler.body for handler in getattr(stmt, "handlers", []))
    return found


def _step_closure(ctx: Context) -> bool:
    """Whether this function is handed to ``xm.add_step_closure``: torch-xla runs it after the
    step's graph has executed, where a read cuts nothing."""
    if ctx.func is None:
        return False
    found = ctx.memo.get("xla_closures")
    if found is None:
        found = ctx.memo["xla_closures"] = frozenset(_CLOSURE.findall(ctx.src.text))
    return ctx.func.name in found  # type: ignore[operator]


def _only_raises_or_logs(node: ast.AST) -> bool:
    """A branch whose body only raises or logs (argument checks, warnings): it runs once per
    call, and ``torch.where`` is no fix for it."""
    if not isinstance(node, ast.If) or node.orelse:
        return False
    for stmt in node.body:
        if isinstance(stmt, ast.Raise):
            continue
        call = _attr_call(stmt.value) if isinstance(stmt, ast.Expr) else None
        name = stmt.value.func.id if (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
        ) else None  # fmt: skip
        if (call is not None and call[1] in _LOGS) or name in _LOGS:
            continue
        return False
    return True


# Functions that are not a training step (issue 40): evaluation and generation loops read
# values on the host by design (a metric, a stop flag per token), once per batch or token, and
# what they cost is not the step's. Said by their names, as libraries and users name them.
_OUTSIDE_THE_STEP = re.compile(
    r"^_?(eval|evaluate|evaluation|validate|validation|predict|prediction|generate|generation)"
    r"(_|$)|_search$|_decoding$|^(sample|beam_sample)$"
)


def _every_n_steps(ctx: Context) -> list[tuple[int, int]]:
    """The line spans of ``if`` bodies taken every N steps (a ``%`` in the test: ``if step %
    log_every == 0:``): a read there is already read less often, which is the advice."""
    spans = []
    for node in ctx.nodes:
        if isinstance(node, ast.If) and any(
            isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(node.test)
        ):
            spans.append((node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno))
    return spans


@dataclass
class _XlaRule:
    code: str
    name: str
    summary: str
    triggers: frozenset[str]
    # Their words ("where", "item", "sum", "max"...) are in most functions of any model file,
    # while few modules import torch-xla: without a scope the engine would walk nearly every
    # function of a tree for rules that return at once (``check``).
    scope: ClassVar[str] = XLA_SCOPE
    # a read inside ``if step % N == 0:`` is already "read less often"; a shape or a branch
    # there still makes its own graph, so only the plain host read is let be
    read_every_n_is_fine: ClassVar[bool] = False

    def check(self, ctx: Context) -> Iterator[Match]:
        if ctx.func is None or not uses_xla(ctx) or _step_closure(ctx):
            return
        if _OUTSIDE_THE_STEP.search(ctx.func.name):
            return  # evaluation, generation: their reads are not a training step's cost
        every_n = _every_n_steps(ctx) if self.read_every_n_is_fine else []
        for node in ctx.nodes:
            if every_n and any(a <= getattr(node, "lineno", 0) <= b for a, b in every_n):
                continue  # logged every N steps: the advice ("less often") is what it does
            message = self.message(ctx, node)
            if message is not None:
                test = getattr(node, "test", None) if not isinstance(node, ast.Call) else None
                yield Match(code=self.code, message=message, node=test or node,
                            severity=SEVERITY)  # fmt: skip

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        raise NotImplementedError


class DataDependentShape(_XlaRule):
    def __init__(self) -> None:
        super().__init__("TRN301", "data-dependent-shape-on-xla",
                         "an output shape that depends on the data on an XLA device",
                         _DATA_SHAPED | {"where"})  # fmt: skip

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        call = _attr_call(node)
        if call is None or not isinstance(node, ast.Call):
            return None
        name = call[1]
        if name == "where":
            if not (isinstance(call[0], ast.Name) and call[0].id in ctx.info.torch):
                return None
            if len(node.args) != 1 or node.keywords:
                return None  # torch.where(cond, a, b) keeps the shape
        elif name not in _DATA_SHAPED:
            return None
        operand = call[0] if not (isinstance(call[0], ast.Name) and call[0].id in ctx.info.torch) \
            else (node.args[0] if node.args else None)  # fmt: skip
        if operand is not None and _on_host(ctx, operand):
            return None  # a host tensor: no XLA graph involved
        return (
            f"on XLA, `{name}` has an output shape that depends on the data: the pending graph "
            "executes here to know it (and the op may fall back to the CPU); keep a fixed shape "
            "(a slice such as `x[:, :n]` when the selection is a prefix, a mask multiplied in, "
            "`torch.where(cond, a, b)`)"
        )


def _is_host_read(node: ast.AST) -> bool:
    call = _attr_call(node)
    return call is not None and call[1] in _HOST_READS


class HostRead(_XlaRule):
    read_every_n_is_fine = True

    def __init__(self) -> None:
        super().__init__("TRN302", "host-read-on-xla",
                         "a tensor's value read on the host in XLA code", _HOST_READS)  # fmt: skip

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        call = _attr_call(node)
        if call is None or call[1] not in _HOST_READS or not isinstance(node, ast.Call):
            return None
        if node.args or node.keywords:
            return None
        if _is_host_read(call[0]):
            return None  # `t.cpu().numpy()`: the `.cpu()` is the read, reported once
        if _on_host(ctx, call[0]):
            return None  # already a host value: nothing lazy to read
        if _after_sync(ctx, node.lineno):
            return None  # the graph already ran: the advice is what the code does
        return (
            f"on XLA, `.{call[1]}()` reads a lazy tensor on the host: the pending graph executes "
            "here, mid-step (a forced execution: two graphs instead of one); read it after "
            "`torch_xla.sync()`, or less often"
        )


class TensorControlFlow(_XlaRule):
    def __init__(self) -> None:
        super().__init__("TRN303", "tensor-control-flow-on-xla",
                         "Python control flow on a tensor's value in XLA code",
                         _VALUE_METHODS)  # fmt: skip

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        if not isinstance(node, ast.If | ast.While | ast.IfExp):
            return None
        if not _depends_on_values(node.test):
            return None
        if any(_is_host_read(sub) for sub in ast.walk(node.test)):
            return None  # `if t.item() == 0:`: TRN302 reports that read, once
        if _only_raises_or_logs(node):
            return None
        names = [n.id for n in ast.walk(node.test)
                 if isinstance(n, ast.Name) and n.id not in ctx.info.torch]  # fmt: skip
        if names and all(_host_name(ctx, name, node.lineno) for name in names):
            return None  # a branch on host tensors only
        return (
            "on XLA, a Python branch on a tensor's value reads it on the host: run lazily, the "
            "pending graph executes here each time; traced, the branch taken with the example "
            "inputs is baked into the compiled graph and later values do not change it; use "
            "`torch.where`"
        )


XLA_RULES = (DataDependentShape(), HostRead(), TensorControlFlow())
