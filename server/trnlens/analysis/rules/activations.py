"""TRN004 hand-written GELU (erf or tanh form) and TRN005 hand-written SiLU / SwiGLU gate.

``F.gelu`` and ``F.silu`` are single kernels computing the same formula; the hand-written forms
cost one dispatch and one intermediate tensor per arithmetic operation.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator

from trnlens.analysis.patterns import (
    close_to,
    constant_value,
    factors,
    number,
    op_call,
    tensor_ops,
)
from trnlens.analysis.rules.base import Context, Match

_GELU_TANH_SCALE = math.sqrt(2 / math.pi)


def _one_plus(node: ast.expr) -> ast.expr | None:
    """For ``1 + t`` or ``t + 1``: ``t``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        if number(node.left) == 1:
            return node.right
        if number(node.right) == 1:
            return node.left
    return None


def _erf_argument_is_x_over_sqrt2(ctx: Context, arg: ast.expr, x: ast.expr) -> bool:
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Div):
        return ctx.flow.same(arg.left, x) and close_to(constant_value(arg.right), math.sqrt(2))
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mult):
        for a, b in ((arg.left, arg.right), (arg.right, arg.left)):
            if ctx.flow.same(a, x) and close_to(constant_value(b), 1 / math.sqrt(2)):
                return True
    return False


def _is_cube(ctx: Context, node: ast.expr, x: ast.expr) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return number(node.right) == 3 and ctx.flow.same(node.left, x)
    call = op_call(node, {"pow"}, ctx.info)
    if call is not None and call.operand is not None:
        return number(call.arg(0, "exponent")) == 3 and ctx.flow.same(call.operand, x)
    parts = factors(node)
    return len(parts) == 3 and all(ctx.flow.same(p, x) for p in parts)


def _tanh_argument_matches(ctx: Context, arg: ast.expr, x: ast.expr) -> bool:
    """``sqrt(2/pi) * (x + 0.044715 * x**3)``."""
    scale = [f for f in factors(arg) if constant_value(f) is not None]
    rest = [f for f in factors(arg) if constant_value(f) is None]
    if (
        len(scale) != 1
        or len(rest) != 1
        or not close_to(constant_value(scale[0]), _GELU_TANH_SCALE)
    ):
        return False
    inner = rest[0]
    if not (isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add)):
        return False
    for lin, cubic in ((inner.left, inner.right), (inner.right, inner.left)):
        if not ctx.flow.same(lin, x):
            continue
        coeff = [f for f in factors(cubic) if constant_value(f) is not None]
        cube = [f for f in factors(cubic) if constant_value(f) is None]
        if len(coeff) == 1 and close_to(constant_value(coeff[0]), 0.044715):
            if len(cube) == 1 and _is_cube(ctx, cube[0], x):
                return True
            if len(cube) == 3 and all(ctx.flow.same(c, x) for c in cube):
                return True
    return False


class GeluRule:
    code = "TRN004"
    name = "naive-gelu"
    summary = "hand-written GELU; use torch.nn.functional.gelu"
    triggers = frozenset({"erf", "tanh"})

    def check(self, ctx: Context) -> Iterator[Match]:
        for node in ctx.nodes:
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
                continue
            if isinstance(ctx.parents.get(id(node)), ast.BinOp) and isinstance(
                ctx.parents[id(node)].op,  # type: ignore[attr-defined]
                ast.Mult,
            ):
                continue  # only the outermost product of a chain
            match = self._match(ctx, node)
            if match is not None:
                yield match

    def _match(self, ctx: Context, node: ast.BinOp) -> Match | None:
        chain = factors(node)
        if len(chain) != 3:
            return None
        halves = [f for f in chain if close_to(constant_value(f), 0.5)]
        if len(halves) != 1:
            return None
        others = [f for f in chain if f is not halves[0]]
        for x, bracket in ((others[0], others[1]), (others[1], others[0])):
            inner = _one_plus(bracket)
            call = op_call(inner, {"erf", "tanh"}, ctx.info) if inner is not None else None
            if call is None or call.operand is None:
                continue
            if call.name == "erf" and _erf_argument_is_x_over_sqrt2(ctx, call.operand, x):
                return self._to_match(ctx, node, x, "")
            if call.name == "tanh" and _tanh_argument_matches(ctx, call.operand, x):
                return self._to_match(ctx, node, x, ', approximate="tanh"')
        return None

    def _to_match(self, ctx: Context, node: ast.BinOp, x: ast.expr, approximate: str) -> Match:
        ops = tensor_ops(node)
        n = len(ops)
        torch = ctx.info.torch_name()
        form = "tanh-approximated GELU" if approximate else "GELU"
        return Match(
            code=self.code,
            message=(
                f"hand-written {form}: {n} separate dispatches and {n - 1} intermediate tensors; "
                f"torch.nn.functional.gelu runs as one kernel"
            ),
            node=node,
            ops=ops,
            replacements=[(node, f"{torch}.nn.functional.gelu({ctx.text(x)}{approximate})")],
            fix_message=f"Use `{torch}.nn.functional.gelu`",
        )


class SiluRule:
    code = "TRN005"
    name = "naive-silu"
    summary = "hand-written SiLU (or the gate of a SwiGLU); use torch.nn.functional.silu"
    triggers = frozenset({"sigmoid", "exp"})

    def check(self, ctx: Context) -> Iterator[Match]:
        for node in ctx.nodes:
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
                x = self._silu_input(ctx, node)
                if x is not None:
                    yield self._to_match(ctx, node, x)

    def _silu_input(self, ctx: Context, node: ast.BinOp) -> ast.expr | None:
        if isinstance(node.op, ast.Mult):
            for x, gate in ((node.left, node.right), (node.right, node.left)):
                call = op_call(ctx.flow.deref(gate), {"sigmoid"}, ctx.info)
                if call is not None and call.operand is not None and not call.args:
                    if ctx.flow.same(call.operand, x):
                        return x
            return None
        # x / (1 + exp(-x))
        inner = _one_plus(node.right)
        call = op_call(inner, {"exp"}, ctx.info) if inner is not None else None
        if call is not None and isinstance(call.operand, ast.UnaryOp):
            if isinstance(call.operand.op, ast.USub) and ctx.flow.same(
                call.operand.operand, node.left
            ):
                return node.left
        return None

    def _to_match(self, ctx: Context, node: ast.BinOp, x: ast.expr) -> Match:
        ops = tensor_ops(node)
        n = len(ops)
        torch = ctx.info.torch_name()
        parent = ctx.parents.get(id(node))
        swiglu = isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mult)
        what = "SwiGLU gate (SiLU written out)" if swiglu else "SiLU"
        return Match(
            code=self.code,
            message=(
                f"hand-written {what}: {n} separate dispatches and {n - 1} intermediate tensors; "
                f"torch.nn.functional.silu runs as one kernel"
            ),
            node=node,
            ops=ops,
            replacements=[(node, f"{torch}.nn.functional.silu({ctx.text(x)})")],
            fix_message=f"Use `{torch}.nn.functional.silu`",
        )
