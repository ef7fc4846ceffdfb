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
from trnlens.analysis.walk import parent_table

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
# Leaf node types that only qualify their parent; CPython shares one instance of each.
_LEAVES = frozenset(
    cls
    for base in (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
    for cls in base.__subclasses__()
)

# Fields that never hold a node worth walking: names and flags (strings, numbers), a constant's
# value, and the leaves above (``ctx``, ``op``, ``ops``).
_NOT_NODES = frozenset({
    "id", "attr", "arg", "name", "asname", "module", "level", "is_async", "conversion", "kind",
    "type_comment", "ctx", "op", "ops",
})  # fmt: skip
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(kind: type) -> tuple[str, ...]:
    fields = [f for f in kind._fields if f not in _NOT_NODES]  # type: ignore[attr-defined]
    if kind is ast.Constant:
        fields.remove("value")
    return tuple(fields)


@dataclass
class Context:
    """One function (or a module's top-level statements, with ``func`` None) under analysis."""

    src: SourceText
    info: ModuleInfo
    body: list[ast.stmt]
    func: FunctionNode | None = None
    qualname: str | None = None
    params: list[str] = field(default_factory=list)
    owner: ast.ClassDef | None = None  # the class a method belongs to (its docstring is read)
    # What a rule computed about this context and others may reuse (rules/sync.py's loops).
    memo: dict[str, object] = field(default_factory=dict, init=False, repr=False, compare=False)

    @cached_property
    def flow(self) -> Flow:
        # Built only for functions some rule finds worth a closer look: most functions never pay.
        return Flow(self.body, self.params)

    @property
    def nodes(self) -> list[ast.AST]:
        """Every node of this body in source order (depth first), not descending into nested
        functions or classes (their own contexts analyse them). Leaves that only qualify their
        parent (``Load``, ``Add``, ``Eq``...) are left out: rules read them as ``node.ctx`` or
        ``node.op``, and they are a third of all nodes."""
        return self._scan[0]

    @property
    def names(self) -> frozenset[str]:
        """Every identifier and attribute name in the body (``**`` for a power): a cheap test
        of whether a rule can match here at all."""
        return self._scan[1]

    @cached_property
    def _scan(self) -> tuple[list[ast.AST], frozenset[str]]:
        # One pass for both, written out rather than through ast.iter_child_nodes: this walk
        # visits every node of every file `trnlens check` reads, and the generator layers of
        # the ast module's helpers cost more than the rules that run after it.
        found: list[ast.AST] = []
        names: set[str] = set()
        stack: list[ast.AST] = list(reversed(self.body))
        while stack:
            node = stack.pop()
            found.append(node)
            kind = type(node)
            if kind is ast.Name:
                names.add(node.id)  # type: ignore[attr-defined]
            elif kind is ast.Attribute:
                names.add(node.attr)  # type: ignore[attr-defined]
            elif kind is ast.BinOp and type(node.op) is ast.Pow:  # type: ignore[attr-defined]
                names.add("**")
            elif kind in _SCOPES:
                continue
            children: list[ast.AST] = []
            fields = _CHILD_FIELDS.get(kind)
            if fields is None:
                fields = _CHILD_FIELDS[kind] = _child_fields(kind)
            for name in fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    children.extend(
                        v for v in value if isinstance(v, ast.AST) and type(v) not in _LEAVES
                    )
                elif isinstance(value, ast.AST) and type(value) not in _LEAVES:
                    children.append(value)
            children.reverse()
            stack.extend(children)
        return found, frozenset(names)

    @cached_property
    def parents(self) -> dict[int, ast.AST]:
        return parent_table(self.body)

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


# A rule's optional ``scope``: where alone it can find anything, whatever its trigger words. The
# engine skips a function outside every scope whose rules' words it mentions (engine._may_trigger)
# and each rule's ``check`` must hold to it: ``LOOP_SCOPE``, only inside a loop or comprehension
# of a module that imports torch; ``COMPILED_SCOPE``, only in a torch.compile'd function;
# ``XLA_SCOPE``, only in a function of a module that imports torch-xla (``ModuleInfo.imports_xla``).
LOOP_SCOPE = "loop"
COMPILED_SCOPE = "compiled"
XLA_SCOPE = "xla"


class Rule(Protocol):
    code: str
    name: str  # short, for docs and `--help`
    summary: str
    # The rule runs only in bodies that mention one of these names (see ``Context.names``).
    triggers: frozenset[str]

    def check(self, ctx: Context) -> Iterable[Match]: ...
