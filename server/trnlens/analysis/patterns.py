"""Recognising tensor operations in the AST, written either way real code writes them.

``torch.rsqrt(x)`` and ``x.rsqrt()`` are the same operation; ``OpCall`` gives both one shape
(the tensor operand first, then the remaining arguments) so that rules match the operation and not
the spelling.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

# Names under which torch and torch.nn.functional are usually imported; the engine adds the
# aliases a module actually declares (see ``ModuleInfo``).
DEFAULT_TORCH = frozenset({"torch"})
DEFAULT_FUNCTIONAL = frozenset({"F", "nnf"})


@dataclass(frozen=True)
class ModuleInfo:
    torch: frozenset[str] = DEFAULT_TORCH  # aliases bound to the torch module
    functional: frozenset[str] = DEFAULT_FUNCTIONAL  # aliases bound to torch.nn.functional
    imports_torch: bool = False
    # The module works on lazy XLA tensors (see ``_lazy_xla_import``): rules/xla.py.
    imports_xla: bool = False
    # ``self`` attributes the module only ever assigns host tensors (see rules.placement).
    host_attrs: frozenset[str] = frozenset()
    host_setters: frozenset[tuple[str, str]] = frozenset()  # (method, attribute) it moves to host

    def torch_name(self) -> str:
        """A name the fixed code can use for torch: the module's own alias where it has one."""
        return "torch" if "torch" in self.torch or not self.torch else sorted(self.torch)[0]


def module_info(body: list[ast.stmt]) -> ModuleInfo:
    torch_names: set[str] = set()
    functional: set[str] = set()
    xla = False
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            xla = xla or _lazy_xla_import(node)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch" or (alias.name.startswith("torch.") and not alias.asname):
                    torch_names.add(alias.asname or "torch")
                elif alias.name == "torch.nn.functional":
                    functional.add(alias.asname or "torch")
        elif isinstance(node, ast.ImportFrom) and node.module in {"torch.nn", "torch"}:
            for alias in node.names:
                if alias.name == "functional" and node.module == "torch.nn":
                    functional.add(alias.asname or "functional")
    return ModuleInfo(
        torch=frozenset(torch_names) or DEFAULT_TORCH,
        functional=frozenset(functional) | DEFAULT_FUNCTIONAL,
        imports_torch=bool(torch_names or functional),
        imports_xla=xla,
    )


# What says a module's tensors are lazy XLA tensors (issue 40): torch-xla itself, torch-neuronx's
# XLA ops (code traced through XLA, as NxD's model builder does), or optimum-neuron's training
# side (its trainer and accelerator put the user's tensors on the XLA device). Importing
# ``torch_neuronx`` or optimum-neuron's inference models alone does not: ``torch_neuronx.trace``
# compiles a model ahead of time and the traced model is called with host tensors, so the code
# around it (export checks, pipeline wrappers) reads CPU tensors, which cut no graph.
_XLA_MODULES = ("torch_xla", "torch_neuronx.xla_impl")
_XLA_TRAINING_MODULES = frozenset({"trainers", "trainer", "training", "accelerate"})
_XLA_TRAINING_NAMES = re.compile(r"Trainer|Training|Accelerator")  # not `PretrainedConfig`


def _lazy_xla_import(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.startswith(_XLA_MODULES) for a in node.names)
    module = node.module or ""
    if module.startswith(_XLA_MODULES):
        return True
    if module == "torch_neuronx":  # `from torch_neuronx import xla_impl`
        return any(a.name == "xla_impl" for a in node.names)
    if module.startswith("optimum.neuron"):
        return not _XLA_TRAINING_MODULES.isdisjoint(module.split(".")) or any(
            _XLA_TRAINING_NAMES.search(a.name) for a in node.names
        )
    return False


@dataclass(frozen=True)
class OpCall:
    name: str
    operand: ast.expr | None  # the tensor the op works on: receiver of a method, else 1st argument
    args: tuple[ast.expr, ...]  # the remaining positional arguments
    keywords: dict[str, ast.expr]
    node: ast.Call
    is_method: bool

    def arg(self, position: int, keyword: str) -> ast.expr | None:
        if position < len(self.args):
            return self.args[position]
        return self.keywords.get(keyword)


def dotted(node: ast.AST) -> str | None:
    """``torch.nn.functional`` for that attribute chain; None for anything not a plain chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def is_module_ref(node: ast.AST, info: ModuleInfo) -> bool:
    """Is ``node`` torch, torch.nn.functional or one of their aliases (as the head of a call)?"""
    name = dotted(node)
    if name is None:
        return False
    return (
        name in info.torch
        or name in info.functional
        or name in {"torch.nn.functional", "nn.functional", "torch.special", "torch.Tensor"}
    )


def op_call(node: ast.AST, names: set[str] | frozenset[str], info: ModuleInfo) -> OpCall | None:
    """The call as an op in ``names``: ``torch.X(t, ...)``, ``F.X(t, ...)`` or ``t.X(...)``."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    name = node.func.attr
    if name not in names or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    if any(k.arg is None for k in node.keywords):  # **kwargs: arguments unknown
        return None
    keywords = {k.arg: k.value for k in node.keywords if k.arg}
    if is_module_ref(node.func.value, info):
        operand = node.args[0] if node.args else keywords.pop("input", None)
        return OpCall(name, operand, tuple(node.args[1:]), keywords, node, False)
    return OpCall(name, node.func.value, tuple(node.args), keywords, node, True)


def number(node: ast.AST | None) -> float | None:
    """The value of a numeric literal (``2``, ``-1``, ``0.5``); None for anything else."""
    if isinstance(node, ast.Constant):
        value = node.value
        # bool is an int subclass, but True is no number here
        return float(value) if isinstance(value, int | float) and type(value) is not bool else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = number(node.operand)
        if inner is not None:
            return -inner if isinstance(node.op, ast.USub) else inner
    return None


def is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def is_last_dim(node: ast.AST | None) -> bool:
    """``-1``, ``(-1,)`` or ``[-1]``: the reductions these rules accept."""
    if isinstance(node, ast.Tuple | ast.List) and len(node.elts) == 1:
        node = node.elts[0]
    return number(node) == -1


_FLOAT32 = {"float32", "float"}


def is_float32_dtype(node: ast.AST | None) -> bool:
    name = dotted(node) if node is not None else None
    return name is not None and name.split(".")[-1] in _FLOAT32 and "." in name


def upcast_operand(node: ast.AST, info: ModuleInfo) -> ast.expr | None:
    """For ``t.float()``, ``t.to(torch.float32)`` or ``t.type(torch.float32)``: ``t``."""
    call = op_call(node, {"float", "to", "type"}, info)
    if call is None or not call.is_method:
        return None
    if call.name == "float" and not call.args and not call.keywords:
        return call.operand
    if call.name in {"to", "type"} and len(call.args) + len(call.keywords) == 1:
        if is_float32_dtype(call.arg(0, "dtype")):
            return call.operand
    return None


def strip_upcasts(node: ast.expr, info: ModuleInfo) -> ast.expr:
    """``t`` for ``t.float().to(torch.float32)`` and the like: the tensor under its upcasts."""
    while (inner := upcast_operand(node, info)) is not None:
        node = inner
    return node


def is_pure_ref(node: ast.AST) -> bool:
    """A name, attribute chain or constant subscript: cheap to evaluate twice, no tensor op."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return is_pure_ref(node.value)
    if isinstance(node, ast.Subscript):
        return is_pure_ref(node.value) and isinstance(node.slice, ast.Constant | ast.Name)
    return False


def is_scalar_expr(node: ast.AST) -> bool:
    """A literal, a name or attribute, or arithmetic on those: what an ``eps`` looks like."""
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float)
    if isinstance(node, ast.Name | ast.Attribute):
        return is_pure_ref(node)
    if isinstance(node, ast.UnaryOp):
        return is_scalar_expr(node.operand)
    if isinstance(node, ast.BinOp):
        return is_scalar_expr(node.left) and is_scalar_expr(node.right)
    return False


def needs_parens(node: ast.AST) -> bool:
    """Must ``node``'s text be parenthesised before ``.attr`` or as an operand?"""
    return not isinstance(
        node, ast.Name | ast.Attribute | ast.Call | ast.Subscript | ast.Constant | ast.Tuple
    )


def constant_value(node: ast.AST) -> float | None:
    """Evaluate a constant numeric expression (``math.sqrt(2 / math.pi)``); None if not one."""
    value = number(node)
    if value is not None:
        return value
    name = dotted(node)
    if name in {"math.pi", "np.pi", "numpy.pi", "torch.pi"}:
        return math.pi
    if isinstance(node, ast.BinOp):
        left, right = constant_value(node.left), constant_value(node.right)
        if left is None or right is None:
            return None
        try:
            return _BINOPS[type(node.op)](left, right)
        except (KeyError, ZeroDivisionError, OverflowError, ValueError):
            return None
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        func = dotted(node.func)
        arg = constant_value(node.args[0])
        if arg is not None and func in {"math.sqrt", "np.sqrt", "numpy.sqrt"} and arg >= 0:
            return math.sqrt(arg)
        if arg is not None and func == "float":
            return arg
    return None


_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}


def close_to(value: float | None, target: float, rel: float = 1e-4) -> bool:
    return value is not None and abs(value - target) <= rel * abs(target)


def factors(node: ast.expr) -> list[ast.expr]:
    """The operands of a product chain: ``a * b * c`` gives ``[a, b, c]``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return factors(node.left) + factors(node.right)
    return [node]


def tensor_ops(node: ast.AST) -> list[ast.AST]:
    """Arithmetic and calls in ``node`` that are not constant folding: the dispatches it costs."""
    ops: list[ast.AST] = []
    for child in ast.walk(node):
        if isinstance(child, ast.BinOp | ast.UnaryOp | ast.Call) and constant_value(child) is None:
            if isinstance(child, ast.UnaryOp) and not isinstance(child.op, ast.USub):
                continue
            ops.append(child)
    return ops
