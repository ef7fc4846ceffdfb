"""Is the profiled function a whole training step? A static look at what it calls.

``--mode auto`` (the default) runs a function *as written* (grad enabled, nothing added) when it
or a project function it calls calls ``backward`` (``loss.backward()``, ``torch.autograd.backward``
or ``.grad``) or an optimizer's ``step``; otherwise it runs in inference mode. Running a training
step under ``inference_mode`` fails at its backward line, and adding our own backward after it
backwards through a freed graph a second time.

The check lives in the agent, not the server: the agent has the imported module, so a call such
as ``helper(x)`` or ``self.update()`` resolves to the very function that will run (through the
module's globals, the instance's class, imported project modules), and the CLI, the editor, warm
and remote runs all decide the same way. It reads source with the stdlib ``ast``; nothing runs.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass

# Receivers whose ``.step()`` is an optimizer's: named like one (``opt``, ``self.optimizer``,
# ``adam``...), or bound at run time to a torch.optim.Optimizer (checked when resolvable).
OPTIMIZER_NAME = re.compile(r"(^|_)(opt|optim|optimi[sz]er|sgd|adam|adamw|lamb|lion)s?($|_)", re.I)
MAX_DEPTH = 4  # project calls followed from the profiled function


@dataclass
class Found:
    what: str  # "loss.backward()" / "opt.step()"
    path: str
    line: int


def find_training_call(function, module, instance, project, torch) -> Found | None:
    """The first ``backward``/optimizer ``step`` call reached from ``function``, or None."""
    seen: set = set()
    return _search(function, module, instance, project, torch, seen, 0)


def _search(function, module, instance, project, torch, seen, depth) -> Found | None:
    function = inspect.unwrap(getattr(function, "__func__", function))
    code = getattr(function, "__code__", None)
    if code is None or code in seen or depth > MAX_DEPTH:
        return None
    seen.add(code)
    node = _function_node(code, project)
    if node is None:
        return None
    namespace = getattr(function, "__globals__", None) or vars(module)
    relpath = project.relpath(code.co_filename)
    callees = []
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        found = _training_call(call, namespace, instance, torch)
        if found:
            return Found(found, relpath, call.lineno)
        callee = _resolve(call.func, namespace, instance)
        if callee is not None:
            callees.append(callee)
    for callee in callees:
        deeper = _search(callee, module, instance, project, torch, seen, depth + 1)
        if deeper:
            return deeper
    return None


def _function_node(code, project):
    """The def of ``code`` in its project file (read through the project: unsaved buffers too)."""
    filename = code.co_filename
    if not project.is_project_file(filename):
        return None
    try:
        tree = ast.parse(project.read(filename))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if first <= code.co_firstlineno <= node.lineno:
                return node
    return None


def _training_call(call: ast.Call, namespace, instance, torch) -> str | None:
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    text = _dotted(func)
    if func.attr == "backward":
        return f"{text}()"
    if func.attr == "grad" and text.endswith("autograd.grad"):
        return f"{text}()"
    if func.attr == "step":
        receiver = func.value
        name = receiver.attr if isinstance(receiver, ast.Attribute) else _dotted(receiver)
        value = _value_of(receiver, namespace, instance)
        optim = getattr(getattr(torch, "optim", None), "Optimizer", None)
        if (optim is not None and isinstance(value, optim)) or OPTIMIZER_NAME.search(name or ""):
            return f"{text}()"
    return None


def _dotted(node) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # unparse cannot fail on parsed nodes, but this is only a label
        return "?"


def _value_of(node, namespace, instance):
    """What a Name or ``self.attr`` chain is bound to now, when that is knowable statically."""
    if isinstance(node, ast.Name):
        return namespace.get(node.id)
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            base = instance
        else:
            base = _value_of(node.value, namespace, instance)
        return _static_attr(base, node.attr) if base is not None else None
    return None


def _static_attr(obj, name):
    """An attribute without running the user's code (no properties, no ``__getattr__``);
    nn.Module keeps submodules in ``_modules``, so that is looked into too."""
    try:
        return inspect.getattr_static(obj, name)
    except AttributeError:
        pass
    try:
        modules = inspect.getattr_static(obj, "_modules")
    except AttributeError:
        return None
    return modules.get(name) if isinstance(modules, dict) else None


def _resolve(func, namespace, instance):
    value = _value_of(func, namespace, instance)
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if inspect.isfunction(value) or inspect.ismethod(value):
        return value
    return None
