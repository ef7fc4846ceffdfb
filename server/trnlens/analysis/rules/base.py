"""What every rule sees (``Context``) and returns (``Match``), and the ``Rule`` interface.

A rule only recognises a pattern and says what to replace; turning a ``Match`` into a ``Finding``
with edits and a runnable variant is common to all rules and lives in ``analysis.fixes``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from trnlens.analysis.dataflow import Def, Flow
from trnlens.analysis.patterns import ModuleInfo
from trnlens.analysis.source import SourceText

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Context:
    """One function (or a module's top-level statements, with ``func`` None) under analysis."""

    src: SourceText
    info: ModuleInfo
    body: list[ast.stmt]
    func: FunctionNode | None = None
    qualname: str | None = None
    params: list[str] = field(default_factory=list)

    @cached_property
    def flow(self) -> Flow:
        # Built only for functions some rule finds worth a closer look: most functions never pay.
        return Flow(self.body, self.params)

    @cached_property
    def nodes(self) -> list[ast.AST]:
        return list(self.walk())

    @cached_property
    def names(self) -> frozenset[str]:
        """Every identifier and attribute name in the body (``**`` for a power): a cheap test
        of whether a rule can match here at all."""
        found: set[str] = set()
        for node in self.nodes:
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
                found.add("**")
        return frozenset(found)

    @cached_property
    def parents(self) -> dict[int, ast.AST]:
        table: dict[int, ast.AST] = {}
        for stmt in self.body:
            for node in ast.walk(stmt):
                for child in ast.iter_child_nodes(node):
                    table[id(child)] = node
        return table

    def walk(self) -> Iterable[ast.AST]:
        """Every node of this body, not descending into nested functions or classes (their own
        contexts analyse them)."""
        stack: list[ast.AST] = list(reversed(self.body))
        while stack:
            node = stack.pop()
            yield node
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            stack.extend(reversed(list(ast.iter_child_nodes(node))))

    def text(self, node: ast.AST) -> str:
        return self.src.segment(node)

    def operand_text(self, node: ast.AST) -> str:
        """Source of ``node``, parenthesised where it would bind wrongly as an operand."""
        from trnlens.analysis.patterns import needs_parens

        text = self.text(node)
        return f"({text})" if needs_parens(node) else text


@dataclass
class Match:
    code: str
    message: str
    node: ast.AST  # the range the finding is reported on
    ops: list[ast.AST] = field(default_factory=list)  # tensor ops of the naive pattern
    # The fix: replace each node's source by the text; delete the assignments that only fed it.
    replacements: list[tuple[ast.AST, str]] = field(default_factory=list)
    candidates: list[Def] = field(default_factory=list)  # assignments the fix may delete
    fix_message: str | None = None
    applicability: str = "safe"
    extra_nodes: list[ast.AST] = field(default_factory=list)  # more nodes the pattern spans
    # None: "warning" with a safe fix, else "info" (see ``fixes.to_finding``); "hint" for a
    # sync the code needs.
    severity: str | None = None
    claim: str | None = None  # what kind of finding, where a rule reports more than one


class Rule(Protocol):
    code: str
    name: str  # short, for docs and `--help`
    summary: str
    # The rule runs only in bodies that mention one of these names (see ``Context.names``).
    triggers: frozenset[str]

    def check(self, ctx: Context) -> Iterable[Match]: ...
