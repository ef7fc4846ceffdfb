"""Where ``▶ Profile`` lenses go: where a person would want to profile, not on every function.

``trnlens.lenses.placement`` = ``"torch"`` (the default): ``nn.Module`` classes, their
``forward``, functions and methods that use torch (a name bound by ``import torch`` /
``from torch... import`` appears in their body, their parameters' defaults or their annotations:
``def f(x: torch.Tensor): return x * 2`` works on tensors too) and anything with a
``# trnlens:`` directive above it. Dunder methods (``__init__``, ``__repr__``...) and
``extra_repr`` get none even when they build layers: profiling a constructor says nothing about
the model's speed. ``"all"`` brings back a lens on every function, method and ``nn.Module``
class.

A function already profiled (a placed run) or with a pending job keeps its lens whatever the
setting says, so that its figures and its cancel button never vanish.
"""

from __future__ import annotations

import ast

_NEVER = {"extra_repr"}


def torch_names(tree: ast.Module) -> frozenset[str]:
    """Names that refer to torch or a part of it, bound by imports anywhere in the module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch" or alias.name.startswith("torch."):
                    # `import torch.nn as nn` binds nn; `import torch.nn` binds torch.
                    names.add(alias.asname or alias.name.split(".", 1)[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "torch" or node.module.startswith("torch."):
                names.update(alias.asname or alias.name for alias in node.names)
    return frozenset(names)


def uses_torch(node: ast.AST, names: frozenset[str]) -> bool:
    """Whether a name bound to torch is read in the definition: its body, its parameters'
    defaults and annotations, its return annotation (decorators aside)."""
    if not names:
        return False
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        body = [*node.body, node.args]
        if node.returns is not None:
            body.append(node.returns)
    else:
        body = [node]
    for statement in body:
        for sub in ast.walk(statement):
            if isinstance(sub, ast.Name) and sub.id in names:
                return True
    return False


def has_directive(lines: list[str], start_line: int) -> bool:
    """A ``# trnlens:`` comment in the unbroken comment run right above 0-based ``start_line``."""
    index = start_line - 1
    while index >= 0 and lines[index].lstrip().startswith("#"):
        if "trnlens:" in lines[index]:
            return True
        index -= 1
    return False


def wants_lens(qualname: str, kind: str, wanted: bool, modules: set[str], placement: str) -> bool:
    """``wanted``: the definition uses torch or carries a directive (see :func:`uses_torch`)."""
    if placement == "all" or kind == "class":
        return True
    parent, _, name = qualname.rpartition(".")
    if name == "forward" and parent in modules:
        return True
    if name in _NEVER or (name.startswith("__") and name.endswith("__")):
        return False
    return wanted
