"""TRN003: a hand-written softmax, ``exp(x) / exp(x).sum(dim, keepdim=True)``, with or without
the max subtracted first. ``torch.softmax`` is one kernel and always subtracts the max, so it
equals the stable form exactly and the unstable one wherever that one does not overflow."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trnlens.analysis.patterns import is_true, number, op_call
from trnlens.analysis.rules.base import Context, Match
from trnlens.analysis.rules.rmsnorm import Parts


def _exp_operand(ctx: Context, node: ast.expr, parts: Parts) -> ast.expr | None:
    call = op_call(parts.follow(ctx, node), {"exp"}, ctx.info)
    if call is None or call.operand is None or call.args or call.keywords:
        return None
    parts.ops.append(call.node)
    return call.operand


def _max_shifted(ctx: Context, node: ast.expr, dim: float, parts: Parts) -> ast.expr | None:
    """For ``x - x.max(dim, keepdim=True)[0]`` (or ``.values``, or ``amax``): ``x``."""
    value = parts.follow(ctx, node)
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Sub)):
        return None
    reduced = parts.follow(ctx, value.right)
    if isinstance(reduced, ast.Subscript) and number(reduced.slice) == 0:
        reduced = reduced.value
    elif isinstance(reduced, ast.Attribute) and reduced.attr == "values":
        reduced = reduced.value
    elif op_call(reduced, {"amax"}, ctx.info) is None:
        return None
    call = op_call(reduced, {"max", "amax"}, ctx.info)
    if call is None or call.operand is None or not ctx.flow.same(call.operand, value.left):
        return None
    if number(call.arg(0, "dim")) != dim or not is_true(call.arg(1, "keepdim")):
        return None
    parts.ops.extend([call.node, value])
    return value.left


class SoftmaxRule:
    code = "TRN003"
    name = "naive-softmax"
    summary = "hand-written softmax; use torch.softmax"
    triggers = frozenset({"exp"})

    def check(self, ctx: Context) -> Iterator[Match]:
        for node in ctx.nodes:
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                match = self._match(ctx, node)
                if match is not None:
                    yield match

    def _match(self, ctx: Context, node: ast.BinOp) -> Match | None:
        parts = Parts()
        total = op_call(parts.follow(ctx, node.right), {"sum"}, ctx.info)
        if total is None or total.operand is None or len(total.args) + len(total.keywords) != 2:
            return None
        dim = number(total.arg(0, "dim"))
        if dim is None or not is_true(total.arg(1, "keepdim")):
            return None
        if not ctx.flow.same(total.operand, node.left):
            return None
        exponent = _exp_operand(ctx, node.left, parts)
        if exponent is None:
            return None
        x = _max_shifted(ctx, exponent, dim, parts) or exponent
        parts.ops.extend([total.node, node])
        n = len(parts.ops)
        torch = ctx.info.torch_name()
        return Match(
            code=self.code,
            message=(
                f"naive softmax: {n} separate dispatches and {n - 1} intermediate tensors; "
                f"torch.softmax runs as one fused kernel"
            ),
            node=node,
            ops=list(parts.ops),
            candidates=list(parts.defs),
            replacements=[(node, f"{torch}.softmax({ctx.text(x)}, dim={int(dim)})")],
            fix_message=f"Use `{torch}.softmax`",
        )
