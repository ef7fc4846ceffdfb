"""A document's definitions, parsed block by block so that an edit re-parses only its block.

Parsing a whole module is linear in its size and holds the interpreter (CPython's parser never
lets other threads in): 1.2 s for a 50,000-line file, on every keystroke, on the event loop. So
the text is cut into top-level blocks (a def, a class, an import... at lines that start at column
0: ``analysis.source.statement_starts``, as the analysis engine cuts it), each block is parsed on
its own and what the editor needs of it (its definitions, the torch names it binds, the names
each definition reads) is kept by the block's text. An edit then re-parses the block it touched.
A block that does not parse alone (a column-0 line inside a multi-line string) is merged with the
next ones; when that does not help, the whole module is parsed at once, and its SyntaxError is
the caller's (the document keeps its last good parse).
"""

from __future__ import annotations

import ast
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

from trnlens.agent import sources
from trnlens.analysis.source import statement_starts
from trnlens.lsp.placement import torch_names

MAX_MERGE = 8  # blocks a block that does not parse alone may absorb before the module is parsed
_KEPT = 20_000  # blocks remembered (a block's facts are small: names and line numbers)


@dataclass(frozen=True)
class Definition:
    """A function, method or class, with 0-based lines in its block (``Outline.definitions``
    pairs it with the block's first line: kept by the block's text, it is never copied to move
    it)."""

    qualname: str
    kind: str  # "function", "method" or "class"
    def_line: int
    start_line: int  # its first decorator's, else the def's
    end_line: int
    column: int
    bases: tuple[str, ...]  # a class's base names (the last part of a dotted one)
    reads: frozenset[str]  # names read in its body, parameters and annotations (not decorators)


@dataclass(frozen=True)
class _Block:
    """What one block's text holds, its lines counted from the block's first."""

    definitions: tuple[Definition, ...]
    torch_names: frozenset[str]


@dataclass(frozen=True)
class Outline:
    definitions: list[tuple[int, Definition]]  # (0-based line of its block, the definition)
    torch_names: frozenset[str]  # names bound to torch by imports anywhere in the module


class _Blocks:
    """Blocks by a digest of their text (a thread-safe LRU: the watcher's thread parses too)."""

    def __init__(self) -> None:
        self._data: OrderedDict[bytes, _Block] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> _Block | None:
        with self._lock:
            found = self._data.get(key)
            if found is not None:
                self._data.move_to_end(key)
            return found

    def put(self, key: bytes, block: _Block) -> None:
        with self._lock:
            self._data[key] = block
            while len(self._data) > _KEPT:
                self._data.popitem(last=False)


_BLOCKS = _Blocks()
# Above this many lines a text whose blocks do not parse is not parsed whole to find out why: the
# parser holds the interpreter for the whole call (a 50,000-line module: about 1 s), and the
# parse runs in a worker thread beside the server's event loop, which it would starve. Such a
# text (a syntax error while typing) keeps its last good parse, as any text that does not parse.
WHOLE_PARSE_MAX_LINES = 2_000


def outline(text: str) -> Outline:
    """The module's definitions; raises SyntaxError (or ValueError: a NUL byte) as ``ast.parse``
    does for the whole text."""
    lines = text.splitlines(keepends=True)
    starts = statement_starts(lines)
    head = lines[: starts[0]] if starts else lines
    if any(line.strip() and not line.lstrip().startswith("#") for line in head):
        return _whole(text)  # code before the first block (an indented line): the parser says
    bounds = [*starts, len(lines)]
    found: list[tuple[int, Definition]] = []
    names: set[str] = set()
    i = 0
    while i < len(starts):
        for j in range(i + 1, min(i + 1 + MAX_MERGE, len(bounds))):
            block = _block("".join(lines[starts[i] : bounds[j]]))
            if block is not None:
                break
        else:
            if len(lines) > WHOLE_PARSE_MAX_LINES:  # see WHOLE_PARSE_MAX_LINES
                raise SyntaxError(f"line {starts[i] + 1}: no block from here parses")
            return _whole(text)
        found.extend((starts[i], d) for d in block.definitions)
        names |= block.torch_names
        i = j
    return Outline(found, frozenset(names))


def _block(text: str) -> _Block | None:
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    block = _BLOCKS.get(key)
    if block is None:
        try:
            tree = sources.parse(text)
        except (SyntaxError, ValueError):
            return None
        block = _facts(tree)
        _BLOCKS.put(key, block)
    return block


def _whole(text: str) -> Outline:
    tree = sources.parse(text)  # raises: the module does not parse
    block = _facts(tree)
    return Outline([(0, d) for d in block.definitions], block.torch_names)


def _facts(tree: ast.Module) -> _Block:
    found = []
    for qualname, node, in_class in sources.iter_definitions(tree):
        if isinstance(node, ast.ClassDef):
            kind = "class"
            bases = tuple(
                b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases
            )
        else:
            kind, bases = ("method" if in_class else "function"), ()
        start = min([d.lineno for d in node.decorator_list] + [node.lineno])
        found.append(
            Definition(
                qualname,
                kind,
                node.lineno - 1,
                start - 1,
                (node.end_lineno or node.lineno) - 1,
                node.col_offset,
                bases,
                _reads(node),
            )  # fmt: skip
        )
    return _Block(tuple(found), torch_names(tree))


def _reads(node: ast.AST) -> frozenset[str]:
    """The names ``placement.uses_torch`` looks for: in a function's body, parameters and return
    annotation; anywhere in a class."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parts: list[ast.AST] = [*node.body, node.args]
        if node.returns is not None:
            parts.append(node.returns)
    else:
        parts = [node]
    return frozenset(
        sub.id for part in parts for sub in ast.walk(part) if isinstance(sub, ast.Name)
    )
