"""The user's source text: definitions by qualname, source hashes, ``# trnlens:`` directives.

Pure stdlib on purpose: the language server imports this module too, so that the agent and the
editor compute the same ``source_hash`` (the key for stale results) from one implementation.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass

DIRECTIVE = re.compile(r"#\s*trnlens:\s*(?P<body>.*)$")
_ASSIGNMENT = re.compile(r"(?P<key>[A-Za-z_][\w-]*)\s*=\s*(?P<value>[^\s,;]+)")


@dataclass(frozen=True)
class Definition:
    qualname: str
    kind: str  # "function", "method" or "class"
    def_line: int  # 1-based line of the `def` / `class` keyword
    start_line: int  # first decorator line, or def_line
    end_line: int
    params: tuple[str, ...]  # parameter names of a function (empty for a class)


class DefinitionNotFound(LookupError):
    pass


def parse(text: str, path: str = "<unknown>") -> ast.Module:
    return ast.parse(text, filename=path)


def iter_definitions(tree: ast.Module):
    """Yields every function, method and class with its dotted qualname (no ``<locals>``)."""

    def walk(body, prefix: str, in_class: bool):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = f"{prefix}{node.name}"
                yield qualname, node, in_class
                if isinstance(node, ast.ClassDef):
                    yield from walk(node.body, qualname + ".", True)

    yield from walk(tree.body, "", False)


def find_definition(text: str, qualname: str, path: str = "<unknown>") -> Definition:
    tree = parse(text, path)
    for name, node, in_class in iter_definitions(tree):
        if name == qualname:
            return _definition(name, node, in_class)
    available = [name for name, _, _ in iter_definitions(tree)]
    hint = f" (defined here: {', '.join(available[:12])})" if available else ""
    raise DefinitionNotFound(f"{path} has no function or class named {qualname!r}{hint}")


def _definition(qualname: str, node, in_class: bool) -> Definition:
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    if isinstance(node, ast.ClassDef):
        kind, params = "class", ()
    else:
        kind = "method" if in_class else "function"
        a = node.args
        params = tuple(p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs])
    return Definition(qualname, kind, node.lineno, start, node.end_lineno or node.lineno, params)


def functions(tree: ast.Module) -> list[Definition]:
    """Every function and method (not classes), as ``iter_definitions`` walks them."""
    return [
        _definition(name, node, in_class)
        for name, node, in_class in iter_definitions(tree)
        if not isinstance(node, ast.ClassDef)
    ]


def definition_text(text: str, definition: Definition) -> str:
    lines = text.splitlines()
    return "\n".join(lines[definition.start_line - 1 : definition.end_line])


def source_hash(text: str, definition: Definition) -> str:
    """sha256 of the definition's source, decorators included, trailing whitespace ignored."""
    body = "\n".join(line.rstrip() for line in definition_text(text, definition).splitlines())
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def read_directives(text: str, definition: Definition) -> dict[str, str]:
    """``# trnlens: key=value`` comments on the lines directly above the definition.

    Only the unbroken run of comment lines right above the first decorator (or the ``def``) counts,
    so a directive never leaks from one function to the next.
    """
    lines = text.splitlines()
    found: dict[str, str] = {}
    index = definition.start_line - 2
    while index >= 0 and lines[index].strip().startswith("#"):
        match = DIRECTIVE.search(lines[index].strip())
        if match:
            for item in _ASSIGNMENT.finditer(match.group("body")):
                found.setdefault(item.group("key"), item.group("value"))
        index -= 1
    return found
