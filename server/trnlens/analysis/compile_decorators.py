"""Whether a function is decorated with ``torch.compile``: read by the analysis engine (which
lenses a compiled function gets) and by the graph-break rules (which only look inside one)."""

from __future__ import annotations

import ast

_COMPILERS = frozenset({"torch.compile", "torch._dynamo.optimize"})


def is_compiled(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated with ``torch.compile`` (bare or called with options)."""
    for decorator in func.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(target) in _COMPILERS:
            return True
    return False
