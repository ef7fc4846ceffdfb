"""analysis.walk: the same nodes as ``ast.walk`` in the same order; a parent for every node
under the statements given."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from trnlens.analysis.walk import parent_table, walk

SAMPLES = sorted(Path("samples").glob("*.py")) + sorted(
    Path("server/trnlens/analysis").rglob("*.py")
)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: str(p))
def test_walk_is_ast_walk(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    want = list(ast.walk(tree))
    got = walk(tree)
    assert len(got) == len(want)
    assert all(a is b for a, b in zip(got, want, strict=True))


def test_every_node_but_the_shared_leaves_has_its_parent() -> None:
    tree = ast.parse("def f(x, *a, k=None, **kw):\n    return {1: x, **kw}[x] + g(*a, k=k)\n")
    table = parent_table(tree.body)
    assert id(tree.body[0]) not in table  # the statements given are the roots
    for node in ast.walk(tree.body[0]):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr_context | ast.operator):
                assert id(child) not in table  # one shared Load for the whole program
            else:
                assert table[id(child)] is node
