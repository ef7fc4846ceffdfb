"""Telling a scalar scale (``math.sqrt(d)``, ``self.scale``, ``q.size(-1) ** -0.5``) from a
tensor, by what the expression calls."""

from __future__ import annotations

import ast

from trnlens.analysis.patterns import ModuleInfo, dotted, is_module_ref

# Calls that return Python numbers, not tensors.
_SCALAR_CALLS = frozenset({"math.sqrt", "np.sqrt", "numpy.sqrt", "float", "int", "len"})
_SHAPE_METHODS = frozenset({"size", "dim"})


def is_scale_expr(node: ast.AST, info: ModuleInfo) -> bool:
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            name = dotted(child.func)
            is_shape = isinstance(child.func, ast.Attribute) and child.func.attr in _SHAPE_METHODS
            if name not in _SCALAR_CALLS and not is_shape:
                return False
        elif isinstance(child, ast.Attribute) and is_module_ref(child.value, info):
            return False  # torch.something: a tensor or a dtype, not a scale
        elif isinstance(child, ast.Subscript | ast.Lambda | ast.ListComp | ast.Compare):
            if not (
                isinstance(child, ast.Subscript)
                and isinstance(child.value, ast.Attribute)
                and child.value.attr == "shape"
            ):
                return False
    return True
