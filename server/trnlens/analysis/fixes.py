"""From a rule's ``Match`` to a ``Finding``: edits, the fixed variant of the function, spans.

Also applies edits to text (for ``trnlens check --fix`` and for building variants), last edit first
so that earlier offsets stay valid.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import replace

from trnlens.analysis.dataflow import Def
from trnlens.analysis.model import NOT_TIMED, Edit, Finding, Fix, Location
from trnlens.analysis.rules.base import Context, Match
from trnlens.analysis.source import SourceText


def to_finding(ctx: Context, match: Match, filename: str) -> Finding:
    nodes = [match.node, *match.extra_nodes, *match.ops]
    first = min(n.lineno for n in nodes)  # type: ignore[attr-defined]
    last = max(n.end_lineno for n in nodes)  # type: ignore[attr-defined]
    finding = Finding(
        code=match.code,
        message=match.message + NOT_TIMED,
        location=ctx.src.node_start(match.node),
        end_location=ctx.src.node_end(match.node),
        filename=filename,
        qualname=ctx.qualname,
        naive_dispatches=len(match.ops) or None,
        lines=(first, last),
    )
    if match.replacements and match.fix_message:
        edits = list(_replacement_edits(ctx, match))
        deleted = removable_statements(ctx, match)
        edits.extend(_deletion_edit(ctx.src, stmt) for stmt in deleted)
        edits.sort(key=lambda e: e.location)
        finding.fix = Fix(match.fix_message, tuple(edits), match.applicability)
        if deleted:
            finding.lines = (
                min(first, *(s.lineno for s in deleted)),
                max(last, *(s.end_lineno or s.lineno for s in deleted)),
            )
        finding.variant_source = variant_source(ctx, finding.fix)
    finding.severity = match.severity or severity_of(finding)
    if match.claim:
        finding.extra["claim"] = match.claim
    return finding


def severity_of(finding: Finding) -> str:
    """A warning only where the fix is proven (safe: numerically equivalent, tested); without
    one a finding is information until a run measures what it costs."""
    return "warning" if finding.fix and finding.fix.applicability == "safe" else "info"


def _replacement_edits(ctx: Context, match: Match) -> Iterable[Edit]:
    for node, text in match.replacements:
        yield Edit(text, ctx.src.node_start(node), ctx.src.node_end(node))


def add_missing_import(finding: Finding, row: int) -> None:
    """Make a fix that names torch work in a module that never imported it: ``import torch``
    at ``row`` (after the docstring and ``__future__`` imports), and in the variant too."""
    fix = finding.fix
    if fix is None or not any("torch." in e.content for e in fix.edits):
        return
    edit = Edit("import torch\n", Location(row, 1), Location(row, 1))
    finding.fix = Fix(fix.message, (edit, *fix.edits), fix.applicability)
    if finding.variant_source is not None:
        finding.variant_source = "import torch\n" + finding.variant_source


def removable_statements(ctx: Context, match: Match) -> list[ast.stmt]:
    """Assignments that fed only the replaced expression: deleting them is what saves dispatches.

    An assignment is deleted only when every read of it lies inside the code being replaced or
    deleted, and it sits alone on its lines (so deleting whole lines deletes nothing else).
    """
    covered: set[int] = set()
    for node, _ in match.replacements:
        covered.update(id(n) for n in ast.walk(node))
    removed: list[ast.stmt] = []
    pending: list[Def] = list(dict.fromkeys(match.candidates))
    changed = True
    while changed:
        changed = False
        for d in list(pending):
            stmt = d.stmt
            if not isinstance(stmt, ast.Assign | ast.AnnAssign) or d.value is None:
                pending.remove(d)
                continue
            if all(id(u) in covered for u in d.uses) and _alone_on_lines(ctx.src, stmt):
                covered.update(id(n) for n in ast.walk(stmt))
                removed.append(stmt)
                pending.remove(d)
                changed = True
    return removed


def _alone_on_lines(src: SourceText, stmt: ast.stmt) -> bool:
    start, end = src.node_start(stmt), src.node_end(stmt)
    before = src.line(start.row)[: start.column - 1]
    after = src.line(end.row)[end.column - 1 :].strip()
    return not before.strip() and (not after or after.startswith("#"))


def _deletion_edit(src: SourceText, stmt: ast.stmt) -> Edit:
    end_row = stmt.end_lineno or stmt.lineno
    return Edit("", Location(stmt.lineno, 1), Location(end_row + 1, 1))


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """Apply non-overlapping edits (positions refer to ``text`` before any edit)."""
    src = SourceText(text)
    spans = sorted(
        ((src.offset(e.location), src.offset(e.end_location), e.content) for e in edits),
        reverse=True,
    )
    previous_start = len(text) + 1
    for start, end, content in spans:
        if end > previous_start:  # overlapping edits: keep the later one only
            continue
        text = text[:start] + content + text[end:]
        previous_start = start
    return text


def function_lines(ctx: Context) -> tuple[int, int] | None:
    """First (decorators included) and last line of the enclosing function, when it owns them."""
    func = ctx.func
    if func is None:
        return None
    first = min([func.lineno, *(d.lineno for d in func.decorator_list)])
    head = ctx.src.line(first).lstrip()
    if not (head.startswith(("def ", "async ", "@"))):
        return None  # shares its first line with other code (``class A: def f...``)
    return first, func.end_lineno or func.lineno


def variant_source(ctx: Context, fix: Fix) -> str | None:
    """The enclosing function with ``fix`` applied, dedented so that it can be exec'd alone."""
    span = function_lines(ctx)
    if span is None:
        return None
    first, last = span
    inside = [e for e in fix.edits if first <= e.location.row and e.end_location.row <= last + 1]
    if len(inside) != len(fix.edits):
        return None
    segment = "".join(ctx.src.lines[first - 1 : last])
    if not segment.endswith("\n"):
        segment += "\n"
    shifted = [
        Edit(
            e.content,
            Location(e.location.row - first + 1, e.location.column),
            Location(e.end_location.row - first + 1, e.end_location.column),
        )
        for e in inside
    ]
    return dedent_block(apply_edits(segment, shifted), ctx.src.indent_of(first))


def dedent_block(text: str, indent: str) -> str:
    """Remove exactly ``indent`` from every line that starts with it.

    Unlike ``textwrap.dedent`` this is not defeated by a docstring line at column 0.
    """
    if not indent:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(line[len(indent) :] if line.startswith(indent) else line for line in lines)


def shifted(finding: Finding, rows: int) -> Finding:
    """A copy of ``finding`` moved down by ``rows`` lines (a cached block that moved)."""
    if rows == 0:
        return replace(finding)

    def move(loc: Location) -> Location:
        return Location(loc.row + rows, loc.column)

    fix = finding.fix
    if fix is not None:
        edits = tuple(Edit(e.content, move(e.location), move(e.end_location)) for e in fix.edits)
        fix = Fix(fix.message, edits, fix.applicability)
    lines = finding.lines
    return replace(
        finding,
        location=move(finding.location),
        end_location=move(finding.end_location),
        fix=fix,
        lines=(lines[0] + rows, lines[1] + rows) if lines else None,
        extra=dict(finding.extra),
    )
