"""TRN007: a hand-written log-softmax, ``x - torch.logsumexp(x, dim, keepdim=True)`` or written out
in full, ``z - torch.log(torch.exp(z).sum(dim, keepdim=True))`` with or without the max
subtracted first (``z = x - x.max(dim, keepdim=True)[0]``). ``torch.log_softmax`` is one kernel
that subtracts the max itself: it equals the stable forms, and the unstable one wherever that one
does not overflow (tests/analysis/test_logsoftmax.py measures both in float32 and bfloat16)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trnlens.analysis.patterns import OpCall, is_true, number, op_call
from trnlens.analysis.rules.base import Context, Match
from trnlens.analysis.rules.rmsnorm import Parts
from trnlens.analysis.rules.softmax import _exp_operand, _max_shifted


class LogSoftmaxRule:
    code = "TRN007"
    name = "naive-log-softmax"
    summary = "hand-written log-softmax; use torch.log_softmax"
    triggers = frozenset({"logsumexp", "log"})
    # `torch.log(`, `.log()`, `logsumexp`: not the word "log" of loggers and comments.
    text_triggers = frozenset({"logsumexp", ".log("})

    def check(self, ctx: Context) -> Iterator[Match]:
        for node in ctx.nodes:
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
                match = self._match(ctx, node)
                if match is not None:
                    yield match

    def _match(self, ctx: Context, node: ast.BinOp) -> Match | None:
        parts = Parts()
        right = parts.follow(ctx, node.right)
        found = _logsumexp(ctx, right, parts) or _log_sum_exp(ctx, right, parts)
        if found is None:
            return None
        operand, dim = found
        if not ctx.flow.same(operand, node.left):
            return None
        x = _max_shifted(ctx, node.left, dim, parts) or node.left
        parts.ops.append(node)
        n = len(parts.ops)
        torch = ctx.info.torch_name()
        return Match(
            code=self.code,
            message=(
                f"naive log-softmax: {n} separate dispatches and {n - 1} intermediate tensors; "
                f"torch.log_softmax runs as one fused kernel"
            ),
            node=node,
            ops=list(parts.ops),
            candidates=list(parts.defs),
            replacements=[(node, f"{torch}.log_softmax({ctx.text(x)}, dim={int(dim)})")],
            fix_message=f"Use `{torch}.log_softmax`",
        )


def _reduced(call: OpCall | None, parts: Parts) -> float | None:
    """The dim of a ``(dim, keepdim=True)`` reduction with nothing else given."""
    if call is None or call.operand is None or len(call.args) + len(call.keywords) != 2:
        return None
    dim = number(call.arg(0, "dim"))
    if dim is None or not is_true(call.arg(1, "keepdim")):
        return None
    parts.ops.append(call.node)
    return dim


def _logsumexp(ctx: Context, node: ast.expr, parts: Parts) -> tuple[ast.expr, float] | None:
    """``torch.logsumexp(x, dim, keepdim=True)`` / ``x.logsumexp(...)``: (x, dim)."""
    call = op_call(node, {"logsumexp"}, ctx.info)
    dim = _reduced(call, parts)  # None unless the call and its operand are there
    if dim is None or call is None or call.operand is None:
        return None
    return call.operand, dim


def _log_sum_exp(ctx: Context, node: ast.expr, parts: Parts) -> tuple[ast.expr, float] | None:
    """``torch.log(torch.exp(z).sum(dim, keepdim=True))`` in either spelling: (z, dim)."""
    log = op_call(node, {"log"}, ctx.info)
    if log is None or log.operand is None or log.args or log.keywords:
        return None
    trial = Parts()
    total = op_call(trial.follow(ctx, log.operand), {"sum"}, ctx.info)
    dim = _reduced(total, trial)
    if dim is None or total is None or total.operand is None:
        return None
    z = _exp_operand(ctx, total.operand, trial)
    if z is None:
        return None
    parts.ops.extend([*trial.ops, log.node])
    parts.defs.extend(trial.defs)
    return z, dim
