"""A graph's IR text (``torch_xla._XLAC._get_xla_tensors_text``) read into nodes, and what
differs between two graphs: the cause of a recompilation.

With ``XLA_IR_DEBUG=1`` every node carries the innermost Python frame that made it, as
``location=<function>@<file basename>:<line>`` (the basename only: ``Sources`` finds the
project file it names). A node reads::

    %13 = f32[4,5]{1,0} aten::mul(%12, %0), scope=aten::mul.1, location=step@step.py:12, ...

Two graphs of the same code compile apart when a node's shape or dtype changed (a length that
varies, an input of another shape) or a value baked into the graph changed (IR text prints no
constant values: identical texts then mean a constant). The first node that differs, in graph
order, is the cause; its location is the line.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from dataclasses import dataclass

_NODE = re.compile(
    r"^\s*%(?P<id>\d+) = (?P<shape>\S+) (?P<op>[\w:.]+)\((?P<args>[^)]*)\)"
    r"(?:.*?location=(?P<func>[^@,\s]+)@(?P<file>[^:,\s]+):(?P<line>\d+))?"
)
_LAYOUT = re.compile(r"\{[\d,]*\}")


@dataclass(frozen=True)
class Node:
    op: str
    shape: str  # "f32[4,5]": dtype and dimensions, without the layout
    file: str | None  # basename, from XLA_IR_DEBUG
    line: int | None
    func: str | None


def parse(text: str) -> list[Node]:
    nodes = []
    for raw in text.splitlines():
        m = _NODE.match(raw)
        if m is None:
            continue
        line = m.group("line")
        nodes.append(Node(m.group("op"), _LAYOUT.sub("", m.group("shape")), m.group("file"),
                          int(line) if line else None, m.group("func")))  # fmt: skip
    return nodes


class Sources:
    """Basenames of the project's imported files -> (relpath): where an IR location points.
    A basename two project files share is ambiguous and stays unresolved."""

    def __init__(self, is_project_file, relpath):
        self.is_project_file = is_project_file
        self.relpath = relpath
        self._by_name: dict[str, str | None] | None = None

    def _names(self) -> dict[str, str | None]:
        if self._by_name is None:
            found: dict[str, str | None] = {}
            for module in list(sys.modules.values()):
                filename = getattr(module, "__file__", None)
                if not filename or not self.is_project_file(filename):
                    continue
                name = os.path.basename(filename)
                rel = self.relpath(filename)
                found[name] = rel if found.get(name, rel) == rel else None
            self._by_name = found
        return self._by_name

    def resolve(self, node: Node) -> tuple[str, int] | None:
        if node.file is None or node.line is None:
            return None
        rel = self._names().get(node.file)
        return (rel, node.line) if rel else None


def nodes_per_line(nodes: list[Node], sources: Sources) -> tuple[Counter, int]:
    """IR nodes made on each project line, and how many were made elsewhere (library code);
    device data (the graph's inputs) is not counted."""
    counts: Counter = Counter()
    elsewhere = 0
    for node in nodes:
        if node.op == "xla::device_data":  # an input (data already on the device), not work
            continue
        site = sources.resolve(node)
        if site is None:
            elsewhere += 1
        else:
            counts[site] += 1
    return counts, elsewhere


def cause(before: list[Node], after: list[Node], sources: Sources) -> dict:
    """What changed between two graphs of the step: ``kind`` (shape, input, constant, graph),
    ``detail`` for people, and the ``path``/``line`` of the first node that differs. Node by node
    only when both graphs have the same ops in the same order (a length that varies, an input of
    another shape); otherwise the graphs are compared as sets of nodes (``_changed``): position k
    of one graph is not position k of the other once a node was added."""
    if [n.op for n in before] != [n.op for n in after]:
        return _changed(before, after, sources)
    for old, new in zip(before, after, strict=False):
        if (old.op, old.shape) == (new.op, new.shape):
            continue
        site = sources.resolve(new) or sources.resolve(old)
        if new.op == "xla::device_data" and old.op == new.op:
            kind = "input"
            detail = f"an input changed: {old.shape} -> {new.shape}"
        elif old.op == new.op:
            kind = "shape"
            detail = f"{new.op} changed shape: {old.shape} -> {new.shape}"
        else:
            kind = "graph"
            detail = f"a different op: {old.op} {old.shape} -> {new.op} {new.shape}"
        return _where({"kind": kind, "detail": detail, "op": new.op, "shape": new.shape}, site,
                      new)  # fmt: skip
    if len(before) != len(after):
        longer = after if len(after) > len(before) else before
        node = longer[min(len(before), len(after))]
        return _where(
            {"kind": "graph", "detail": f"the graph has {len(after)} nodes, was {len(before)}"},
            sources.resolve(node),
            node,
        )
    return {
        "kind": "constant",
        "detail": "the IR is the same but for values: a value baked into the graph changed "
        "(a Python number in a shape or a constant)",
        "path": None,
        "line": None,
        "location": None,
    }


def _changed(before: list[Node], after: list[Node], sources: Sources) -> dict:
    """A graph whose nodes changed (an optimizer's state that appears after its first step, a
    branch taken the other way): the nodes one graph has and the other lacks, the first of them
    (the added ones first) at its line."""

    def key(node: Node) -> tuple:
        return (node.op, node.shape, node.file, node.line)

    left = Counter(map(key, before))
    right = Counter(map(key, after))
    added = [n for n in after if right[key(n)] > left.get(key(n), 0)]
    removed = [n for n in before if left[key(n)] > right.get(key(n), 0)]
    work = [n for n in added + removed if n.op != "xla::device_data"] or added + removed
    node = next((n for n in work if sources.resolve(n)), None) or next(
        (n for n in work if n.file), work[0] if work else after[-1] if after else before[-1]
    )  # fmt: skip
    detail = (
        f"the graph changed: {len(added)} node(s) added, {len(removed)} gone "
        f"({len(before)} -> {len(after)} nodes), first {node.op} {node.shape}"
    )
    return _where({"kind": "graph", "detail": detail, "op": node.op, "shape": node.shape},
                  sources.resolve(node), node)  # fmt: skip


def _where(found: dict, site: tuple[str, int] | None, node: Node) -> dict:
    found["path"], found["line"] = site if site else (None, None)
    found["location"] = f"{node.func}@{node.file}:{node.line}" if node.file else None
    return found
