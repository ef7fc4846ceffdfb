"""Where a view's shape was made: the line of ``x = x[:, :n]``, not the line that first used it.

torch-xla makes a view's IR node (``xla::select``, ``xla::generic_slice``...) lazily, when the
view is first used, so with ``XLA_IR_DEBUG`` its location is the use's line: a recompilation
whose shape comes from a slice on line 7 was reported on line 8 (issue 40). The IR cannot say
more, the source can: the names the use line reads, followed back through the enclosing
function to the nearest assignment of one of them whose value slices, views or reshapes.
"""

from __future__ import annotations

import ast

# IR ops that are views of another node: a changed shape there was made where the view was.
VIEW_OPS = frozenset({
    "xla::select", "xla::generic_slice", "xla::view", "aten::view", "aten::slice",
    "aten::narrow", "aten::as_strided", "aten::reshape", "aten::expand", "aten::permute",
    "aten::squeeze", "aten::unsqueeze",
})  # fmt: skip
_VIEW_METHODS = frozenset({
    "view", "reshape", "narrow", "split", "chunk", "expand", "unflatten", "flatten", "squeeze",
    "unsqueeze", "permute", "transpose", "unfold", "view_as", "reshape_as", "expand_as",
})  # fmt: skip


def view_origin(source: str, line: int) -> tuple[int, str] | None:
    """(line, text) of the assignment that made the view read on ``line``, or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    function = _enclosing(tree, line)
    if function is None:
        return None
    used = {
        node.id for node in ast.walk(function)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
        and getattr(node, "lineno", None) == line
    }  # fmt: skip
    best = None
    for node in ast.walk(function):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.lineno >= line:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
        if names & used and node.value is not None and _makes_view(node.value):
            if best is None or node.lineno > best.lineno:
                best = node
    if best is None:
        return None
    lines = source.splitlines()
    return best.lineno, lines[best.lineno - 1].strip() if best.lineno <= len(lines) else ""


def _enclosing(tree: ast.AST, line: int):
    found = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = getattr(node, "end_lineno", None) or node.lineno
            if node.lineno <= line <= end and (found is None or node.lineno > found.lineno):
                found = node
    return found


def _makes_view(value: ast.AST) -> bool:
    for node in ast.walk(value):
        if isinstance(node, ast.Subscript) and any(
            isinstance(part, ast.Slice) for part in ast.walk(node.slice)
        ):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _VIEW_METHODS
        ):
            return True
    return False
