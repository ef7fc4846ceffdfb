"""How often a sync in a loop runs, and what the host wants the value for.

Measured on torchtune's training recipes (docs/rules.md), the sync rules were right that a sync
happens and wrong about the rest: most ``.item()`` calls read a loss for a progress bar or a
metric logger (the useful advice is to read it only on the steps that log it), most ``.cpu()``
calls sat under ``if step % log_every_n_steps == 0`` (every N iterations, not every one), and
a copy while saving or loading a checkpoint has nothing to batch. These helpers say which.
"""

from __future__ import annotations

import ast
import re

from trnlens.analysis.patterns import dotted, number
from trnlens.analysis.rules.base import Context

# Calls that only show or record a value: a logger, a progress bar, a metrics writer.
_LOGGING = re.compile(
    r"(^|_)(log|logs|logger|logging|log_dict|log_metrics|info|debug|warning|print|"
    r"set_description|set_postfix|set_postfix_str|add_scalar|add_scalars|write)(_|$)"
)
# Functions and iterables that save or load a checkpoint (a state dict, parameters).
_CHECKPOINT = re.compile(
    r"state_dict|checkpoint|ckpt|(^|_)sd(?![a-z0-9])|named_parameters|named_buffers"
)


def periodic_guard(node: ast.AST, ctx: Context, loop: ast.AST) -> ast.expr | None:
    """The ``if`` test between ``node`` and its loop that lets it run only every N iterations:
    ``if step % n == 0:`` (alone or in an ``and``), ``if not step % n:``, or an ``and`` whose
    earlier operand is one (``step % n == 0 and x.isnan().any()``); None when it runs every
    iteration as far as the code shows."""
    child, parent = node, ctx.parents.get(id(node))
    while parent is not None and parent is not loop:
        if isinstance(parent, ast.If) and child in parent.body and _is_modulo_test(parent.test):
            return parent.test
        if isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And):
            earlier = parent.values[: parent.values.index(child)] if child in parent.values else []
            if any(_is_modulo_test(v) for v in earlier):
                return parent
        child, parent = parent, ctx.parents.get(id(parent))
    return None


def _is_modulo_test(test: ast.expr) -> bool:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_modulo_test(v) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _is_modulo(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        if isinstance(test.ops[0], ast.Eq):
            sides = [test.left, test.comparators[0]]
            return any(_is_modulo(s) for s in sides)
    return False


def _is_modulo(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and number(node.left) is None
    )


def feeds_logging(node: ast.AST, ctx: Context, loop: ast.AST, depth: int = 0) -> bool:
    """The value is read to be shown or logged: it is an argument of a logging or progress-bar
    call (``pbar.set_description(f"{loss.item()}")``), or it is assigned to a name that says
    so (``loss_to_log = ...``) or that such a call (or a dict of logged values) reads."""
    if depth == 0 and ctx.qualname and "log" in ctx.qualname.split(".")[-1].lower().split("_"):
        return True  # a function that logs (`log_eval_results`): what it reads is to be shown
    child, parent = node, ctx.parents.get(id(node))
    while parent is not None and not isinstance(parent, ast.stmt):
        if isinstance(parent, ast.Call) and child is not parent.func and _is_logging(parent):
            return True
        child, parent = parent, ctx.parents.get(id(parent))
    target = _assigned_name(parent)
    if target is None or depth > 1:
        return False
    if "log" in target.split("_") or target.endswith("_to_log"):
        return True
    uses = [
        n
        for n in ast.walk(loop)
        if isinstance(n, ast.Name) and n.id == target and isinstance(n.ctx, ast.Load)
    ]
    return bool(uses) and all(feeds_logging(use, ctx, loop, depth + 1) for use in uses)


def _assigned_name(stmt: ast.AST | None) -> str | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        if isinstance(target, ast.Name):
            return target.id
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            return target.value.id  # `metrics["loss"] = loss.item()`: the dict's name
    if isinstance(stmt, ast.AugAssign | ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id
    return None


def _is_logging(call: ast.Call) -> bool:
    name = dotted(call.func)
    if name is None and isinstance(call.func, ast.Attribute):
        name = call.func.attr
    if not name:
        return False
    parts = name.split(".")
    return bool(_LOGGING.search(parts[-1])) or any(
        p in {"logger", "logging", "pbar", "writer", "tb_writer", "wandb", "tracker"}
        or p.endswith("_logger")
        for p in parts[:-1]
    )


def for_checkpoint(node: ast.AST, ctx: Context, loop: ast.AST) -> bool:
    """A copy made while saving or loading a checkpoint: in a function named for it
    (``gather_cpu_state_dict``, ``load_checkpoint``) or in a loop over a state dict or a model's
    named parameters. Each tensor is copied once and kept: there is nothing to batch."""
    if ctx.qualname and _CHECKPOINT.search(ctx.qualname.lower()):
        return True
    iters = []
    if isinstance(loop, ast.For | ast.AsyncFor):
        iters.append(loop.iter)
    elif isinstance(loop, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        iters.extend(g.iter for g in loop.generators)
    return any(_CHECKPOINT.search(ast.unparse(it).lower()) for it in iters)


def said_to_offload(node: ast.AST, ctx: Context) -> bool:
    """A comment on the copy's line, or on the line above, says it offloads (``# Offload to
    cpu``): the copy frees device memory on purpose, and "copy once after the loop" would
    defeat it."""
    row = getattr(node, "lineno", 0)
    lines = ctx.src.lines
    for at in (row - 1, row - 2):
        if 0 <= at < len(lines) and "#" in lines[at]:
            if "offload" in lines[at].split("#", 1)[1].lower():
                return True
    return False
