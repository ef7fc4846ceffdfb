"""Which assignment does a name refer to? A small, conservative def-use view of one function.

Real model code spreads one computation over several statements through local variables
(``variance = h.pow(2).mean(...)`` then ``h * torch.rsqrt(variance + eps)``). Rules follow a name
back to the single assignment that reaches it, and a fix may delete an assignment once no other
statement uses it. Only straight-line ``name = value`` assignments are followed: a name assigned in
a branch, a loop, a tuple unpacking or an augmented assignment becomes opaque (its value unknown),
so no rule ever sees a value the name might not hold.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from trnlens.analysis.walk import walk

Env = dict[str, "Def"]

_FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@dataclass(eq=False)
class Def:
    name: str
    value: ast.expr | None  # None: opaque (parameter, loop target, branch, unpacking...)
    stmt: ast.stmt | None
    uses: list[ast.Name] = field(default_factory=list)


class Flow:
    """Name resolution for one function body (or a module's top-level statements)."""

    def __init__(self, body: list[ast.stmt], params: list[str] | None = None) -> None:
        self.resolved: dict[int, Def] = {}  # id(Name load node) -> the Def that reaches it
        self.loop_depth: dict[int, int] = {}  # id(stmt) -> number of enclosing loops
        env: Env = {p: Def(p, None, None) for p in params or []}
        self._block(body, env, 0)

    # -- queries -----------------------------------------------------------------------------
    def deref(self, node: ast.expr) -> ast.expr:
        """Follow a name to the expression assigned to it (once), or return the node itself."""
        if isinstance(node, ast.Name):
            d = self.resolved.get(id(node))
            if d is not None and d.value is not None:
                return d.value
        return node

    def deref_chain(self, node: ast.expr) -> tuple[ast.expr, list[Def]]:
        """Follow names through assignments until a non-name expression; also the Defs passed."""
        passed: list[Def] = []
        while isinstance(node, ast.Name):
            d = self.resolved.get(id(node))
            if d is None or d.value is None or d in passed:
                break
            passed.append(d)
            node = d.value
        return node, passed

    def same(self, a: ast.AST, b: ast.AST) -> bool:
        """Do two expressions compute the same value (same names reaching the same assignments)?"""
        if isinstance(a, ast.Name) and isinstance(b, ast.Name) and a.id == b.id:
            return self.resolved.get(id(a)) is self.resolved.get(id(b))
        if isinstance(a, ast.Name) or isinstance(b, ast.Name):
            da = self.deref(a) if isinstance(a, ast.expr) else a
            db = self.deref(b) if isinstance(b, ast.expr) else b
            if da is a and db is b:
                return False
            return self.same(da, db)
        if type(a) is not type(b):
            return False
        for name, va in ast.iter_fields(a):
            if name == "ctx":
                continue
            vb = getattr(b, name, None)
            if isinstance(va, list):
                if not isinstance(vb, list) or len(va) != len(vb):
                    return False
                if not all(self._same_value(x, y) for x, y in zip(va, vb, strict=True)):
                    return False
            elif not self._same_value(va, vb):
                return False
        return True

    def _same_value(self, a: object, b: object) -> bool:
        if isinstance(a, ast.AST) and isinstance(b, ast.AST):
            return self.same(a, b)
        return a == b

    # -- construction ------------------------------------------------------------------------
    def _block(self, body: list[ast.stmt], env: Env, loops: int) -> Env:
        for stmt in body:
            env = self._stmt(stmt, env, loops)
        return env

    def _stmt(self, stmt: ast.stmt, env: Env, loops: int) -> Env:
        self.loop_depth[id(stmt)] = loops
        if isinstance(stmt, _FUNCTION_NODES):
            # A nested def's free names may read ours: count them as uses so that no fix deletes an
            # assignment a closure still reads.
            for node in walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in env:
                    self._use(node, env)
            return {**env, stmt.name: Def(stmt.name, None, stmt)}
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            self._loads(stmt.value, env)
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                return {**env, target.id: Def(target.id, stmt.value, stmt)}
            self._loads(target, env)
            return self._opaque(env, _stored_names(target), stmt)
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            self._loads(stmt.value, env)
            return {**env, stmt.target.id: Def(stmt.target.id, stmt.value, stmt)}
        if isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
            header = stmt.test if isinstance(stmt, ast.While) else stmt.iter
            self._loads(header, env)
            # Inside a loop a name may hold the value of the previous iteration's assignment.
            inner = self._opaque(env, _assigned_in(stmt), stmt)
            self._block(stmt.body, inner, loops + 1)
            self._block(stmt.orelse, inner, loops)
            return inner
        if isinstance(stmt, ast.If | ast.With | ast.AsyncWith | ast.Try | ast.Match):
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    self._loads(child, env)
                elif isinstance(child, ast.withitem):
                    self._loads(child.context_expr, env)
            for block in _blocks(stmt):
                self._block(block, env, loops)
            return self._opaque(env, _assigned_in(stmt), stmt)
        # Anything else (return, expression, augmented assignment, import, del...): record reads,
        # then make whatever it stores opaque.
        self._loads(stmt, env)
        return self._opaque(env, _assigned_in(stmt), stmt)

    def _loads(self, node: ast.AST, env: Env) -> None:
        for child in walk(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
                self._use(child, env)

    def _use(self, node: ast.Name, env: Env) -> None:
        d = env.get(node.id)
        if d is not None:
            self.resolved[id(node)] = d
            d.uses.append(node)

    @staticmethod
    def _opaque(env: Env, names: set[str], stmt: ast.stmt) -> Env:
        if not names:
            return env
        return {**env, **{n: Def(n, None, stmt) for n in names}}


def _blocks(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        block = getattr(stmt, name, None)
        if block:
            yield block
    for handler in getattr(stmt, "handlers", []):
        yield handler.body
    for case in getattr(stmt, "cases", []):
        yield case.body


def _stored_names(node: ast.AST) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _assigned_in(stmt: ast.stmt) -> set[str]:
    names: set[str] = set()
    for node in walk(stmt):  # one walk for all three kinds (this runs per nested block)
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                names.add(node.id)
        elif isinstance(node, _FUNCTION_NODES[:2] + (ast.ClassDef,)):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names
