"""TRN002: a hand-written LayerNorm, ``(x - mean) / sqrt(var + eps)`` over the last dimension.

The variance may be ``((x - mean) ** 2).mean(-1, keepdim=True)`` or ``x.var(-1, keepdim=True,
unbiased=False)`` (``correction=0``); an unbiased ``var`` is not what ``layer_norm`` computes and
is left alone. As with RMSNorm, a weight and bias stay outside the fused call: folding them in
would change the output dtype when their dtype differs from the input's.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trnlens.analysis.patterns import (
    is_last_dim,
    is_pure_ref,
    is_scalar_expr,
    is_true,
    number,
    op_call,
    strip_upcasts,
)
from trnlens.analysis.rules.base import Context, Match
from trnlens.analysis.rules.rmsnorm import Parts, inverse_sqrt_radicand, sqrt_radicand


def _last_dim_mean(ctx: Context, node: ast.expr, parts: Parts) -> ast.expr | None:
    mean = op_call(parts.follow(ctx, node), {"mean"}, ctx.info)
    if mean is None or mean.operand is None or len(mean.args) + len(mean.keywords) != 2:
        return None
    if not (is_last_dim(mean.arg(0, "dim")) and is_true(mean.arg(1, "keepdim"))):
        return None
    parts.ops.append(mean.node)
    return mean.operand


def _centred(ctx: Context, node: ast.expr, parts: Parts) -> ast.expr | None:
    """For ``x - x.mean(-1, keepdim=True)``: ``x``."""
    value = parts.follow(ctx, node)
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Sub)):
        return None
    trial = Parts()
    operand = _last_dim_mean(ctx, value.right, trial)
    if operand is None or not ctx.flow.same(operand, value.left):
        return None
    parts.ops.extend([*trial.ops, value])
    parts.defs.extend(trial.defs)
    return value.left


def _variance_of(
    ctx: Context, node: ast.expr, centred: ast.expr, x: ast.expr, parts: Parts
) -> bool:
    value = parts.follow(ctx, node)
    var = op_call(value, {"var"}, ctx.info)
    if var is not None and var.operand is not None:
        unbiased = var.keywords.get("unbiased")
        biased = number(var.keywords.get("correction")) == 0 or (
            isinstance(unbiased, ast.Constant) and unbiased.value is False
        )
        if biased and is_last_dim(var.arg(0, "dim")) and is_true(var.keywords.get("keepdim")):
            if ctx.flow.same(var.operand, x):
                parts.ops.append(value)
                return True
        return False
    trial = Parts()
    squared = _last_dim_mean(ctx, value, trial)
    if squared is None:
        return False
    squared = trial.follow(ctx, squared)
    base: ast.expr | None = None
    if isinstance(squared, ast.BinOp) and isinstance(squared.op, ast.Pow):
        base = squared.left if number(squared.right) == 2 else None
    elif isinstance(squared, ast.BinOp) and isinstance(squared.op, ast.Mult):
        base = squared.left if ctx.flow.same(squared.left, squared.right) else None
    else:
        call = op_call(squared, {"pow", "square"}, ctx.info)
        if call is not None and (call.name == "square" or number(call.arg(0, "exponent")) == 2):
            base = call.operand
    if base is None or not ctx.flow.same(base, centred):
        return False
    if isinstance(trial.follow(ctx, base), ast.BinOp) and not isinstance(base, ast.Name):
        trial.ops.append(base)  # ``(x - mu) ** 2`` written out again: its own subtraction
    parts.ops.extend([*trial.ops, squared])
    parts.defs.extend(trial.defs)
    return True


class LayerNormRule:
    code = "TRN002"
    name = "naive-layernorm"
    summary = "hand-written LayerNorm; use torch.nn.functional.layer_norm"
    triggers = frozenset({"mean"})

    def check(self, ctx: Context) -> Iterator[Match]:
        for node in ctx.nodes:
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
                match = self._match(ctx, node)
                if match is not None:
                    yield match

    def _match(self, ctx: Context, node: ast.BinOp) -> Match | None:
        pairs = [(node.left, node.right)]
        if isinstance(node.op, ast.Mult):
            pairs.append((node.right, node.left))
        for numerator, scale in pairs:
            parts = Parts()
            x = _centred(ctx, numerator, parts)
            if x is None:
                continue
            if isinstance(node.op, ast.Div):
                radicand = sqrt_radicand(ctx, scale, parts)
            else:
                radicand = inverse_sqrt_radicand(ctx, scale, parts)
            if radicand is None:
                continue
            value = parts.follow(ctx, radicand)
            if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
                continue
            for var, eps in ((value.left, value.right), (value.right, value.left)):
                if is_scalar_expr(eps) and _variance_of(ctx, var, numerator, x, parts):
                    parts.ops.extend([value, node])
                    return self._to_match(ctx, node, x, eps, parts)
        return None

    def _to_match(
        self, ctx: Context, node: ast.BinOp, x: ast.expr, eps: ast.expr, parts: Parts
    ) -> Match:
        n = len(parts.ops)
        torch = ctx.info.torch_name()
        match = Match(
            code=self.code,
            message=(
                f"naive LayerNorm: {n} separate dispatches and {n - 1} intermediate tensors; "
                f"torch.nn.functional.layer_norm runs as one fused kernel"
            ),
            node=node,
            ops=list(parts.ops),
            candidates=list(parts.defs),
        )
        root = strip_upcasts(x, ctx.info)
        if is_pure_ref(root):  # else the shape would need the input evaluated twice: no fix
            call = (
                f"{torch}.nn.functional.layer_norm({ctx.text(x)}, {ctx.text(root)}.shape[-1:], "
                f"eps={ctx.text(eps)})"
            )
            match.replacements = [(node, call)]
            match.fix_message = f"Use `{torch}.nn.functional.layer_norm`"
        return match
