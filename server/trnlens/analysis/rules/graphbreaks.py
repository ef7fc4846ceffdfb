"""TRN201-TRN204: well-known graph-break causes inside a ``torch.compile``d function.

Dynamo cannot put these into the graph: it stops the graph before them, runs them in Python and
starts a new graph after (two graphs, two dispatches per call instead of one). Seen without
running, in functions decorated with ``torch.compile``; reported as hints (severity ``info``)
because the compiler's own rules decide, and a compiled run (``trnlens profile --compiled`` or the
editor's profile of the decorated function) confirms or clears each one (lsp/compiled.py).

- TRN201 ``print(...)`` or a ``logging`` call;
- TRN202 ``.item()``, ``.tolist()``, ``.numpy()``: a tensor value copied out to Python;
- TRN203 a Python ``if``/``while``/conditional expression on a tensor's value
  (``if x.sum() > 0:``): data-dependent control flow;
- TRN204 a call into numpy or scipy: outside what dynamo traces as torch ops.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from trnlens.analysis.compile_decorators import is_compiled
from trnlens.analysis.rules.base import COMPILED_SCOPE, Context, Match

_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical"})
_LOGGERS = frozenset({"logging", "log", "logger", "_log", "_logger", "LOGGER", "LOG"})
_TO_PYTHON = frozenset({"item", "tolist", "numpy"})
# Methods whose result is a tensor value (a condition on it depends on the data).
_VALUE_METHODS = frozenset({
    "sum", "mean", "max", "min", "any", "all", "item", "norm", "abs", "std", "var", "prod",
    "count_nonzero", "amax", "amin", "allclose", "equal", "isnan", "isinf", "argmax", "argmin",
})  # fmt: skip
# Attributes and methods that are static metadata under dynamo (shapes, dtypes): not data.
_METADATA = frozenset({"shape", "ndim", "dtype", "device", "size", "dim", "numel", "is_cuda",
                       "requires_grad", "training", "is_floating_point"})  # fmt: skip
_HOST_LIBRARIES = frozenset({"np", "numpy", "scipy"})
SEVERITY = "info"


def _nodes(ctx: Context) -> Iterator[ast.AST]:
    if ctx.func is None or not is_compiled(ctx.func):
        return iter(())
    return iter(ctx.nodes)


def _attr_call(node: ast.AST) -> tuple[ast.expr, str] | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.value, node.func.attr
    return None


@dataclass
class _BreakRule:
    code: str
    name: str
    summary: str
    triggers: frozenset[str]
    severity: str = SEVERITY
    scope: ClassVar[str] = COMPILED_SCOPE  # found only in compiled functions (``_nodes``)

    def check(self, ctx: Context) -> Iterator[Match]:
        for node in _nodes(ctx):
            message = self.message(ctx, node)
            if message is not None:
                # A branch is reported on its condition: where dynamo reports the break.
                test = getattr(node, "test", None) if not isinstance(node, ast.Call) else None
                yield Match(code=self.code, message=message, node=test or node)

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        raise NotImplementedError


_COST = "breaks the graph of this torch.compile'd function (one more graph and dispatch per call)"


class PrintInCompiled(_BreakRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN201",
            "print-in-compiled",
            "`print` or logging in a torch.compile'd function: a graph break",
            frozenset({"print", *_LOG_METHODS}),
        )

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "print":
                return f"likely graph break: `print` {_COST}; print outside the compiled function"
            return None
        call = _attr_call(node)
        if call is None or call[1] not in _LOG_METHODS:
            return None
        receiver = call[0]
        name = receiver.id if isinstance(receiver, ast.Name) else None
        if name not in _LOGGERS:
            return None
        return (
            f"likely graph break: logging (`{ast.unparse(receiver)}.{call[1]}`) {_COST}; log "
            "outside the compiled function"
        )


class ValueToPythonInCompiled(_BreakRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN202",
            "value-to-python-in-compiled",
            "`.item()` / `.tolist()` / `.numpy()` in a torch.compile'd function: a graph break",
            _TO_PYTHON,
        )

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        call = _attr_call(node)
        if call is None or call[1] not in _TO_PYTHON or not isinstance(node, ast.Call):
            return None
        if node.args or node.keywords:
            return None
        return (
            f"likely graph break: `.{call[1]}()` copies a tensor's value out to Python: it "
            f"{_COST}; keep the value a tensor"
        )


class DataDependentBranch(_BreakRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN203",
            "data-dependent-branch-in-compiled",
            "Python `if` on a tensor's value in a torch.compile'd function: a graph break",
            _VALUE_METHODS,
        )

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        if not isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
            return None
        if not _depends_on_values(node.test):
            return None
        keyword = {ast.If: "if", ast.While: "while", ast.IfExp: "conditional expression",
                   ast.Assert: "assert"}[type(node)]  # fmt: skip
        return (
            f"likely graph break: a Python `{keyword}` on a tensor's value (data-dependent "
            f"control flow) {_COST}; use `torch.where` or `torch.cond`"
        )


def _depends_on_values(test: ast.expr) -> bool:
    """A condition computed from a tensor's values: a value method call (``x.sum()``), a
    ``torch.*`` call, not shapes, dtypes or ``isinstance``/``is None`` tests."""
    for sub in ast.walk(test):
        call = _attr_call(sub)
        if call is None:
            continue
        receiver, name = call
        if name in _METADATA:
            continue
        if name in _VALUE_METHODS:
            return True
        if isinstance(receiver, ast.Name) and receiver.id == "torch" and name in _VALUE_METHODS:
            return True
    return False


class HostLibraryInCompiled(_BreakRule):
    def __init__(self) -> None:
        super().__init__(
            "TRN204",
            "host-library-in-compiled",
            "numpy / scipy calls in a torch.compile'd function: a likely graph break",
            _HOST_LIBRARIES,
        )

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        if not isinstance(node, ast.Call):
            return None
        root = node.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if not (isinstance(root, ast.Name) and root.id in _HOST_LIBRARIES):
            return None
        if root is node.func:
            return None  # calling the module object itself is not a library call
        return (
            f"likely graph break: `{ast.unparse(node.func)}` calls into {root.id} (not torch); "
            f"what dynamo cannot trace there {_COST}; use the torch equivalent"
        )


GRAPH_BREAK_RULES = (
    PrintInCompiled(),
    ValueToPythonInCompiled(),
    DataDependentBranch(),
    HostLibraryInCompiled(),
)
