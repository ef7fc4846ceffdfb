"""TRN006: hand-written attention, ``softmax(q @ k.transpose(-2, -1) [* scale] [+ mask]) @ v``.

``F.scaled_dot_product_attention`` computes the same in one fused kernel without materialising
the score matrix. The fix is offered only when the attention weights are not used elsewhere
(returned, stored): SDPA does not return them. Dropout between the softmax and the product
is not matched (its randomness makes the two incomparable). Scores without a scale (T5 folds
it into the initialisation of the query projection) get ``scale=1.0``: SDPA's default would
divide by the square root of the head size.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trnlens.analysis.patterns import number, op_call
from trnlens.analysis.rules.base import Context, Match
from trnlens.analysis.rules.rmsnorm import Parts
from trnlens.analysis.scales import is_scale_expr


def _matmul(ctx: Context, node: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return node.left, node.right
    call = op_call(node, {"matmul"}, ctx.info)
    if call is not None and not call.is_method and call.operand is not None and len(call.args) == 1:
        return call.operand, call.args[0]
    return None


def _transposed(ctx: Context, node: ast.expr, parts: Parts) -> ast.expr | None:
    """For ``k.transpose(-2, -1)``, ``k.transpose(-1, -2)`` or ``k.mT``: ``k``."""
    value = parts.follow(ctx, node)
    if isinstance(value, ast.Attribute) and value.attr == "mT":
        parts.ops.append(value)
        return value.value
    call = op_call(value, {"transpose"}, ctx.info)
    if call is None or call.operand is None or len(call.args) != 2 or call.keywords:
        return None
    if {number(call.args[0]), number(call.args[1])} != {-1.0, -2.0}:
        return None
    parts.ops.append(value)
    return call.operand


# SDPA's ``scale=`` for scores not scaled at all (its default is 1 / sqrt(head size)).
UNSCALED = "1.0"


def _fallback_of_the_fused_op(ctx: Context, node: ast.AST) -> bool:
    """In a branch whose other branch calls SDPA (timm's ``if self.fused_attn: ... else:``):
    the code already uses the fused kernel where it can, and keeps the written-out form for
    where it cannot (timm: ONNX export); the fix would take that fallback away."""
    child, parents = node, ctx.parents
    while (parent := parents.get(id(child))) is not None:
        if isinstance(parent, ast.If):
            if any(s is child for s in parent.body):
                other = parent.orelse
            elif any(s is child for s in parent.orelse):
                other = parent.body
            else:
                other = []
            if any(_calls_sdpa(stmt) for stmt in other):
                return True
        child = parent
    return False


def _calls_sdpa(stmt: ast.stmt) -> bool:
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "scaled_dot_product_attention":
                return True
    return False


def _is_minus_inf(node: ast.expr) -> bool:
    text = ast.unparse(node).replace(" ", "")
    return text in {"float('-inf')", 'float("-inf")', "-float('inf')", '-float("inf")', "-math.inf"}


class AttentionRule:
    code = "TRN006"
    name = "naive-attention"
    summary = "hand-written attention; use torch.nn.functional.scaled_dot_product_attention"
    triggers = frozenset({"softmax"})

    def check(self, ctx: Context) -> Iterator[Match]:
        for node in ctx.nodes:
            pair = _matmul(ctx, node) if isinstance(node, ast.expr) else None
            if pair is not None:
                match = self._match(ctx, node, *pair)  # type: ignore[arg-type]
                if match is not None and not _fallback_of_the_fused_op(ctx, node):
                    yield match

    def _match(self, ctx: Context, node: ast.expr, probs: ast.expr, v: ast.expr) -> Match | None:
        parts = Parts()
        softmax = op_call(parts.follow(ctx, probs), {"softmax"}, ctx.info)
        if softmax is None or softmax.operand is None:
            return None
        if number(softmax.arg(0, "dim")) != -1 or len(softmax.args) + len(softmax.keywords) != 1:
            return None
        parts.ops.append(softmax.node)
        scores = parts.follow(ctx, softmax.operand)
        mask_text: str | None = None
        fill = op_call(scores, {"masked_fill"}, ctx.info)
        if (
            fill is not None
            and fill.is_method
            and len(fill.args) == 2
            and _is_minus_inf(fill.args[1])
        ):
            mask_text = f"~({ctx.text(fill.args[0])})"
            parts.ops.append(scores)
            scores = parts.follow(ctx, fill.operand)  # type: ignore[arg-type]
        found = self._scores(ctx, scores, parts)
        if found is None and isinstance(scores, ast.BinOp) and isinstance(scores.op, ast.Add):
            for inner, mask in ((scores.left, scores.right), (scores.right, scores.left)):
                trial = Parts()
                found = self._scores(ctx, parts.follow(ctx, inner), trial)
                if found is not None and mask_text is None:
                    mask_text = ctx.text(mask)
                    parts.ops.extend([*trial.ops, scores])
                    parts.defs.extend(trial.defs)
                    break
                found = None
        if found is None:
            return None
        q, k, scale = found
        parts.ops.append(node)
        n = len(parts.ops)
        unscaled = "" if scale != UNSCALED else " (no scale on the product: scale=1.0 keeps that)"
        match = Match(
            code=self.code,
            message=(
                f"naive attention: {n} separate dispatches and {n - 1} intermediate tensors "
                "(the full score matrix among them); "
                "torch.nn.functional.scaled_dot_product_attention runs as one fused kernel"
                + unscaled
            ),
            node=node,
            ops=list(parts.ops),
            candidates=list(parts.defs),
        )
        torch = ctx.info.torch_name()
        args = [ctx.text(q), ctx.text(k), ctx.text(v)]
        if mask_text is not None:
            args.append(f"attn_mask={mask_text}")
        args.append(f"scale={scale}")
        match.replacements = [
            (node, f"{torch}.nn.functional.scaled_dot_product_attention({', '.join(args)})")
        ]
        match.fix_message = f"Use `{torch}.nn.functional.scaled_dot_product_attention`"
        # Imported here: fixes imports the rules package (a cycle at import time otherwise).
        from trnlens.analysis.fixes import removable_statements

        removed = removable_statements(ctx, match)
        if len(removed) != len({id(d) for d in parts.defs if d.value is not None}):
            match.replacements, match.fix_message = [], None  # the weights are used elsewhere
        return match

    def _scores(
        self, ctx: Context, node: ast.expr, parts: Parts
    ) -> tuple[ast.expr, ast.expr, str] | None:
        """``q @ k^T``, scaled or not: (q, k, the scale for SDPA's ``scale=``)."""
        return self._scaled_scores(ctx, node, parts) or self._unscaled_scores(ctx, node, parts)

    def _unscaled_scores(
        self, ctx: Context, node: ast.expr, parts: Parts
    ) -> tuple[ast.expr, ast.expr, str] | None:
        """``q @ k^T`` alone (T5): SDPA with ``scale=1.0`` computes exactly that product."""
        pair = _matmul(ctx, node)
        if pair is None:
            return None
        trial = Parts()
        k = _transposed(ctx, pair[1], trial)
        if k is None:
            return None
        parts.ops.extend([*trial.ops, node])
        parts.defs.extend(trial.defs)
        return pair[0], k, UNSCALED

    def _scaled_scores(
        self, ctx: Context, node: ast.expr, parts: Parts
    ) -> tuple[ast.expr, ast.expr, str] | None:
        """``q @ k^T`` divided or multiplied by a scale: (q, k, the scale for SDPA's ``scale=``)."""
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div | ast.Mult)):
            return None
        candidates = [(node.left, node.right)]
        if isinstance(node.op, ast.Mult):
            candidates.append((node.right, node.left))
        for product, factor in candidates:
            if not is_scale_expr(factor, ctx.info):
                continue
            trial = Parts()
            pair = _matmul(ctx, trial.follow(ctx, product))
            if pair is None:
                continue
            k = _transposed(ctx, pair[1], trial)
            if k is None:
                continue
            trial.ops.extend([trial.follow(ctx, product), node])
            parts.ops.extend(trial.ops)
            parts.defs.extend(trial.defs)
            text = ctx.text(factor)
            if isinstance(factor, ast.BinOp | ast.UnaryOp):
                text = f"({text})"
            scale = f"1 / {text}" if isinstance(node.op, ast.Div) else text
            return pair[0], k, scale
        return None
