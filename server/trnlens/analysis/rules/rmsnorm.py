"""TRN001: a hand-written RMSNorm, ``x * rsqrt(mean(x**2, -1, keepdim=True) + eps)``.

Recognised however real model code spells it: ``pow(2)``, ``** 2``, ``square()`` or ``x * x``;
``mean(-1, keepdim=True)`` or ``dim=-1``; ``torch.rsqrt(v + eps)``, ``** -0.5`` or a division by
``torch.sqrt(v + eps)``; eps a literal, an argument or an attribute; any part held in a local
variable; the square taken of an upcast copy (T5). The fix replaces only the normalisation by
``torch.rms_norm``, so casts around it (the upcast to float32 and the cast back) stay exactly
where they were and the output dtype does not change. A weight multiply is folded into
``weight=`` only where both sides are visibly float32 (``x.float()`` and ``w.float()``), because
``rms_norm`` with a weight of another dtype returns the input's dtype where the naive product
would have promoted.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from trnlens.analysis.dataflow import Def
from trnlens.analysis.patterns import (
    is_last_dim,
    is_pure_ref,
    is_scalar_expr,
    is_true,
    number,
    op_call,
    strip_upcasts,
    upcast_operand,
)
from trnlens.analysis.rules.base import Context, Match


@dataclass
class Parts:
    """What a partial match found so far."""

    ops: list[ast.AST] = field(default_factory=list)
    defs: list[Def] = field(default_factory=list)

    def follow(self, ctx: Context, node: ast.expr) -> ast.expr:
        value, passed = ctx.flow.deref_chain(node)
        self.defs.extend(passed)
        return value


@dataclass(frozen=True)
class MeanSquare:
    """``mean(square(x), -1, keepdim=True) + eps`` under a square root."""

    squared: ast.expr  # x as written inside the square
    eps: ast.expr
    # The dim when it is held in an attribute (``mean(self.dim, ...)``) rather than visibly the
    # last: the pattern is still RMSNorm, but rms_norm's shape-based fix may not apply.
    dim: ast.expr | None = None


def match_mean_square_plus_eps(ctx: Context, node: ast.expr, parts: Parts) -> MeanSquare | None:
    """Shared with LayerNorm, which needs to know this is *not* a centred variance."""
    radicand = parts.follow(ctx, node)
    if not (isinstance(radicand, ast.BinOp) and isinstance(radicand.op, ast.Add)):
        return None
    for mean_side, eps in ((radicand.left, radicand.right), (radicand.right, radicand.left)):
        if not is_scalar_expr(eps):
            continue
        trial = Parts()
        found = _mean_of_square(ctx, mean_side, trial)
        if found is not None:
            parts.ops.extend([*trial.ops, radicand])
            parts.defs.extend(trial.defs)
            return MeanSquare(found[0], eps, found[1])
    return None


def _mean_of_square(
    ctx: Context, node: ast.expr, parts: Parts
) -> tuple[ast.expr, ast.expr | None] | None:
    """The squared operand, and the dim when an attribute holds it (None: the last dim)."""
    mean = op_call(parts.follow(ctx, node), {"mean"}, ctx.info)
    if mean is None or mean.operand is None:
        return None
    dim = mean.arg(0, "dim")
    held = dim if isinstance(dim, ast.Attribute) else None
    if not ((held is not None or is_last_dim(dim)) and is_true(mean.arg(1, "keepdim"))):
        return None
    if len(mean.args) + len(mean.keywords) != 2:  # a dtype= or out= changes the result
        return None
    squared = _square_operand(ctx, parts.follow(ctx, mean.operand), parts)
    if squared is None:
        return None
    parts.ops.append(mean.node)
    return squared, held


def _square_operand(ctx: Context, node: ast.expr, parts: Parts) -> ast.expr | None:
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Pow) and number(node.right) == 2:
            parts.ops.append(node)
            return node.left
        if isinstance(node.op, ast.Mult) and ctx.flow.same(node.left, node.right):
            parts.ops.append(node)
            return node.left
        return None
    call = op_call(node, {"pow", "square"}, ctx.info)
    if call is None or call.operand is None:
        return None
    if call.name == "square" and not call.args and not call.keywords:
        parts.ops.append(node)
        return call.operand
    if call.name == "pow" and len(call.args) + len(call.keywords) == 1:
        if number(call.arg(0, "exponent")) == 2:
            parts.ops.append(node)
            return call.operand
    return None


def inverse_sqrt_radicand(ctx: Context, node: ast.expr, parts: Parts) -> ast.expr | None:
    """For ``rsqrt(s)``, ``s ** -0.5``, ``s.pow(-0.5)`` or ``1 / sqrt(s)``: ``s``."""
    node = parts.follow(ctx, node)
    call = op_call(node, {"rsqrt", "pow"}, ctx.info)
    if call is not None and call.operand is not None:
        if call.name == "rsqrt" and not call.args and not call.keywords:
            parts.ops.append(node)
            return call.operand
        if call.name == "pow" and number(call.arg(0, "exponent")) == -0.5:
            parts.ops.append(node)
            return call.operand
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and number(node.right) == -0.5:
        parts.ops.append(node)
        return node.left
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and number(node.left) == 1:
        radicand = sqrt_radicand(ctx, node.right, parts)
        if radicand is not None:
            parts.ops.append(node)
            return radicand
    return None


def sqrt_radicand(ctx: Context, node: ast.expr, parts: Parts) -> ast.expr | None:
    """For ``sqrt(s)``, ``s.sqrt()``, ``s ** 0.5`` or ``s.pow(0.5)``: ``s``."""
    node = parts.follow(ctx, node)
    call = op_call(node, {"sqrt", "pow"}, ctx.info)
    if call is not None and call.operand is not None:
        if call.name == "sqrt" and not call.args and not call.keywords:
            parts.ops.append(node)
            return call.operand
        if call.name == "pow" and number(call.arg(0, "exponent")) == 0.5:
            parts.ops.append(node)
            return call.operand
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and number(node.right) == 0.5:
        parts.ops.append(node)
        return node.left
    return None


def _is_centred(ctx: Context, node: ast.expr) -> bool:
    """``x - mean(x)``: squaring that gives a variance, i.e. a LayerNorm (TRN002), not RMSNorm."""
    value = ctx.flow.deref_chain(node)[0]
    inner = upcast_operand(value, ctx.info)
    if inner is not None:
        value = ctx.flow.deref_chain(inner)[0]
    return isinstance(value, ast.BinOp) and isinstance(value.op, ast.Sub)


@dataclass(frozen=True)
class _Core:
    node: ast.BinOp  # x * rsqrt(...) or x / sqrt(...)
    scale: ast.expr  # the operand multiplied (x as written at the product)
    extra_factor: ast.expr | None  # ``w`` when written ``w * x * rsqrt(...)``
    parts: Parts
    mean_square: MeanSquare


def _match_core(ctx: Context, node: ast.BinOp) -> _Core | None:
    if isinstance(node.op, ast.Mult):
        for scale, inverse in ((node.left, node.right), (node.right, node.left)):
            parts = Parts()
            radicand = inverse_sqrt_radicand(ctx, inverse, parts)
            if radicand is None:
                continue
            core = _finish(ctx, node, scale, radicand, parts)
            if core is not None:
                return core
        return None
    if isinstance(node.op, ast.Div):
        parts = Parts()
        radicand = sqrt_radicand(ctx, node.right, parts)
        if radicand is not None:
            return _finish(ctx, node, node.left, radicand, parts)
    return None


def _finish(
    ctx: Context, node: ast.BinOp, scale: ast.expr, radicand: ast.expr, parts: Parts
) -> _Core | None:
    mean_square = match_mean_square_plus_eps(ctx, radicand, parts)
    if mean_square is None or _is_centred(ctx, mean_square.squared):
        return None
    parts.ops.append(node)
    extra: ast.expr | None = None
    product = scale
    if isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult):
        # ``w * x * rsqrt(...)`` parses as ``(w * x) * rsqrt(...)``.
        for factor, other in ((product.right, product.left), (product.left, product.right)):
            if _same_input(ctx, factor, mean_square.squared) is not None:
                scale, extra = factor, other
                parts.ops.append(product)
                break
    if _same_input(ctx, scale, mean_square.squared) is None:
        return None
    return _Core(node, scale, extra, parts, mean_square)


def _same_input(ctx: Context, scale: ast.expr, squared: ast.expr) -> ast.expr | None:
    """The tensor to normalise when ``scale`` and the squared operand are the same tensor.

    T5 squares an upcast copy and multiplies the original, ``h * rsqrt(h.float().pow(2)...)``:
    the product promotes to float32, so ``rms_norm(h.float())`` is the same computation.
    """
    if ctx.flow.same(scale, squared):
        return scale
    inner = upcast_operand(squared, ctx.info)
    if inner is not None and ast.dump(inner) == ast.dump(scale) and ctx.flow.same(inner, scale):
        return squared
    return None


class RMSNormRule:
    code = "TRN001"
    name = "naive-rmsnorm"
    summary = "hand-written RMSNorm; use torch.rms_norm"
    triggers = frozenset({"mean"})

    def check(self, ctx: Context) -> Iterator[Match]:
        for node in ctx.nodes:
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
                core = _match_core(ctx, node)
                if core is not None:
                    yield self._to_match(ctx, core)

    def _to_match(self, ctx: Context, core: _Core) -> Match:
        parts = core.parts
        tensor = _same_input(ctx, core.scale, core.mean_square.squared)
        assert tensor is not None  # _match_core checked it
        torch = ctx.info.torch_name()
        target: ast.AST = core.node
        weight_text = ""
        weight = _foldable_weight(ctx, core, tensor)
        if weight is not None:
            target, weight_node = weight
            parts.ops.append(target)
            weight_text = f", weight={ctx.text(weight_node)}"
        n = len(parts.ops)
        on_lines = _dispatches_on_statements(ctx, [core.node, target, *parts.ops], parts.defs)
        counted = f" (about {on_lines} on its lines as a run counts them)" if on_lines > n else ""
        match = Match(
            code=self.code,
            message=(
                f"naive RMSNorm: {n} separate dispatches and {n - 1} intermediate tensors"
                f"{counted}; torch.rms_norm is one dispatch (on the CPU, _fused_rms_norm "
                "with pow, mean and mul inside)"
            ),
            node=target,
            ops=list(parts.ops),
            candidates=list(parts.defs),
        )
        held = core.mean_square.dim
        if held is not None:
            match.message += (
                f", over the dim held in `{ctx.text(held)}`; no fix offered: torch.rms_norm "
                "normalises the last dims, and the code does not show which dim that is"
            )
            return match
        root = strip_upcasts(tensor, ctx.info)
        if not is_pure_ref(root):
            return match  # the shape would need the tensor evaluated twice: no fix offered
        call = (
            f"{torch}.rms_norm({ctx.text(tensor)}, {ctx.text(root)}.shape[-1:]{weight_text}, "
            f"eps={ctx.text(core.mean_square.eps)})"
        )
        if core.extra_factor is not None:
            call = f"{ctx.operand_text(core.extra_factor)} * {call}"
        match.replacements = [(target, call)]
        match.fix_message = f"Use `{torch}.rms_norm`"
        return match


# Calls that read a tensor's metadata: no dispatch in a run's count.
_NO_DISPATCH = frozenset({"size", "dim", "numel", "shape", "stride", "is_contiguous"})


def _dispatches_on_statements(ctx: Context, nodes: list[ast.AST], defs: list[Def]) -> int:
    """About how many dispatches a run counts on the statements the match spans (the norm's
    own ops plus what shares its lines: upcasts, the weight multiply): each arithmetic
    operator not between two constants and each method or ``torch.*`` call but metadata
    reads. An estimate from the AST, hence "about" in the message."""
    statements: dict[int, ast.stmt] = {}
    for node in nodes:
        found: ast.AST | None = node
        while found is not None and not isinstance(found, ast.stmt):
            found = ctx.parents.get(id(found))
        if isinstance(found, ast.stmt):
            statements[id(found)] = found
    for definition in defs:
        if definition.stmt is not None:
            statements[id(definition.stmt)] = definition.stmt
    count = 0
    for statement in statements.values():
        for node in ast.walk(statement):
            if isinstance(node, ast.BinOp):
                count += not (
                    isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant)
                )
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                count += node.func.attr not in _NO_DISPATCH
    return count


def _foldable_weight(ctx: Context, core: _Core, tensor: ast.expr) -> tuple[ast.AST, ast.AST] | None:
    """``(product, weight)`` when the normalised tensor is multiplied by a weight and both are
    visibly float32, so that ``weight=`` keeps the output dtype; else None."""
    if core.extra_factor is not None:
        return None
    parent = ctx.parents.get(id(core.node))
    if not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mult)):
        return None
    weight = parent.right if parent.left is core.node else parent.left
    if upcast_operand(ctx.flow.deref_chain(tensor)[0], ctx.info) is None:
        return None
    if upcast_operand(weight, ctx.info) is not None:
        return parent, weight
    if isinstance(weight, ast.BinOp) and isinstance(weight.op, ast.Add):
        for const, cast in ((weight.left, weight.right), (weight.right, weight.left)):
            if number(const) is not None and upcast_operand(cast, ctx.info) is not None:
                return parent, weight
    return None
