"""``ast.walk`` without its generator layers: the same nodes in the same order, as a list.

The analysis walks subtrees many times (each statement's reads and stores in ``dataflow``, the
host facts of a chunk, a function's parent table): through ``ast.walk``, ``iter_child_nodes``
and ``iter_fields`` each node costs three generator steps, more than the tests the callers make.
"""

from __future__ import annotations

import ast

# Fields that never hold a node: names, flags, a constant's value. Leaves that qualify their
# parent (``ctx``, ``op``) are nodes and are kept, as ``ast.walk`` yields them.
_NOT_NODES = frozenset({
    "id", "attr", "arg", "name", "asname", "module", "level", "is_async", "conversion", "kind",
    "type_comment",
})  # fmt: skip
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(kind: type) -> tuple[str, ...]:
    fields = [f for f in kind._fields if f not in _NOT_NODES]  # type: ignore[attr-defined]
    if kind is ast.Constant:
        fields.remove("value")
    found = _FIELDS[kind] = tuple(fields)
    return found


def walk(node: ast.AST) -> list[ast.AST]:
    """Every node of ``node``'s tree, itself first, breadth first (``ast.walk``'s order)."""
    found = [node]
    fields_of = _FIELDS
    i = 0
    while i < len(found):
        current = found[i]
        i += 1
        kind = type(current)
        fields = fields_of.get(kind)
        if fields is None:  # not `or`: a leaf's fields are an empty tuple
            fields = _fields(kind)
        for name in fields:
            value = getattr(current, name, None)
            if type(value) is list:
                found.extend(v for v in value if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST):
                found.append(value)
    return found


# Leaf node types that only qualify their parent; CPython shares one instance of each, so
# they have no parent of their own (nobody asks for one).
_LEAVES = frozenset(
    cls
    for base in (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
    for cls in base.__subclasses__()
)


def parent_table(body: list[ast.stmt]) -> dict[int, ast.AST]:
    """id(node) -> its parent, for every node under the statements of ``body`` but the shared
    leaves (``Load``, ``Add``...)."""
    table: dict[int, ast.AST] = {}
    fields_of = _FIELDS
    stack: list[ast.AST] = list(body)
    while stack:
        current = stack.pop()
        kind = type(current)
        fields = fields_of.get(kind)
        if fields is None:  # not `or`: a leaf's fields are an empty tuple
            fields = _fields(kind)
        for name in fields:
            value = getattr(current, name, None)
            if type(value) is list:
                for v in value:
                    if isinstance(v, ast.AST) and type(v) not in _LEAVES:
                        table[id(v)] = current
                        stack.append(v)
            elif isinstance(value, ast.AST) and type(value) not in _LEAVES:
                table[id(value)] = current
                stack.append(value)
    return table
