"""What a module says about ``self`` attributes moved to the host (``self.sigmas = s.to("cpu")``),
read once per chunk of a module by the analysis engine and used by the placement rules.

Not a rule: the engine's infrastructure, kept out of ``rules/`` so that the engine imports no
rule module for it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trnlens.analysis.patterns import dotted
from trnlens.analysis.walk import walk


def names_cpu(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(":")[0] == "cpu"
    if isinstance(node, ast.Call) and node.args and (dotted(node.func) or "").endswith("device"):
        return names_cpu(node.args[0])
    return False


def keyword_value(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


@dataclass(frozen=True)
class HostFacts:
    """What a piece of a module says about ``self`` attributes: those it moves to the host, those
    it assigns anything else, and (method, attribute) for methods whose last word on the
    attribute, in their own body, is a move to the host (diffusers' ``init_sigmas``)."""

    host: frozenset[str] = frozenset()
    other: frozenset[str] = frozenset()
    setters: frozenset[tuple[str, str]] = frozenset()

    def __or__(self, more: HostFacts) -> HostFacts:
        setters = self.setters | more.setters
        return HostFacts(self.host | more.host, self.other | more.other, setters)

    @property
    def host_only(self) -> frozenset[str]:
        """Attributes the module only ever moves to the host (``self.sigmas = s.to("cpu")``)."""
        return self.host - self.other


def host_facts(statements: list[ast.stmt]) -> HostFacts:
    host: set[str] = set()
    other: set[str] = set()
    setters: set[tuple[str, str]] = set()
    for stmt in statements:
        for node in walk(stmt):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and dotted(target.value) == "self":
                        (host if moved_to_host(node.value) else other).add(target.attr)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                last: dict[str, bool] = {}
                for inner in node.body:
                    if isinstance(inner, ast.Assign) and len(inner.targets) == 1:
                        target = inner.targets[0]
                        if isinstance(target, ast.Attribute) and dotted(target.value) == "self":
                            last[target.attr] = moved_to_host(inner.value)
                setters.update((node.name, attr) for attr, moved in last.items() if moved)
    return HostFacts(frozenset(host), frozenset(other), frozenset(setters))


def moved_to_host(node: ast.expr) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr == "cpu":
        return True
    target = keyword_value(node, "device") or (node.args[0] if node.args else None)
    return node.func.attr == "to" and names_cpu(target)
