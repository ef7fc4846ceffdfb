"""Source text in, findings out: parse, visit every function, run the selected rules.

Pure: no I/O beyond ``analyse_path`` reading its file, no torch, nothing executed.
"""

from __future__ import annotations

import ast
import logging
import os
from collections.abc import Iterable, Iterator, Sequence

from trnlens.analysis.dataflow import Flow
from trnlens.analysis.fixes import to_finding
from trnlens.analysis.model import Finding, Location
from trnlens.analysis.patterns import module_info
from trnlens.analysis.rules import ALL_RULES, SYNTAX_CODE, Context, Rule
from trnlens.analysis.source import SourceText, decode, parse_blocks
from trnlens.analysis.suppression import is_selected, is_suppressed

log = logging.getLogger(__name__)

# Past this a file is reported, not parsed: CPython's parser needs several times the text in
# memory, and no hand-written model file comes near it.
MAX_CHARS = 20_000_000


def analyse_source(
    text: str,
    path: str = "<string>",
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    *,
    decode_error: str | None = None,
) -> list[Finding]:
    select = list(select) if select is not None else None
    ignore = list(ignore) if ignore is not None else None
    findings: list[Finding] = []
    if decode_error:
        findings.append(_error(path, f"cannot decode file: {decode_error}", 1, 1))
    if len(text) > MAX_CHARS:
        message = f"file too large to analyse ({len(text):,} characters; limit {MAX_CHARS:,})"
        findings.append(_error(path, message, 1, 1))
        return _filter(findings, SourceText(""), select, ignore)
    parsed = parse_blocks(text)
    if parsed.error is not None:
        e = parsed.error
        note = "; the rest of the file was analysed block by block" if parsed.body else ""
        findings.append(_error(path, e.message + note, e.row, e.column))
    src = SourceText(text)
    rules = [r for r in ALL_RULES if is_selected(r.code, select, ignore)]
    if rules:
        info = module_info(parsed.body)
        for ctx in _contexts(src, info, parsed.body):
            findings.extend(_run_rules(rules, ctx, path))
    return _filter(findings, src, select, ignore)


def analyse_path(
    path: str | os.PathLike[str],
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
) -> list[Finding]:
    """Read a file (any encoding, any bytes) and analyse it; unreadable files give one finding."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return [_error(name, f"cannot read file: {exc.strerror or exc}", 1, 1)]
    decoded = decode(data)
    return analyse_source(decoded.text, name, select, ignore, decode_error=decoded.decode_error)


def _error(path: str, message: str, row: int, column: int) -> Finding:
    loc = Location(row, column)
    return Finding(SYNTAX_CODE, message, loc, loc, filename=path, severity="error")


def _contexts(src: SourceText, info, body: list[ast.stmt]) -> Iterator[Context]:
    yield Context(src, info, body, body, Flow(body))  # module-level code (scripts, loops)
    yield from _scope(src, info, body, body, prefix="")


def _scope(
    src: SourceText, info, module_body: list[ast.stmt], body: Sequence[ast.stmt], prefix: str
) -> Iterator[Context]:
    for node in _defs(body):
        if isinstance(node, ast.ClassDef):
            yield from _scope(src, info, module_body, node.body, f"{prefix}{node.name}.")
            continue
        qualname = f"{prefix}{node.name}"
        flow = Flow(node.body, _params(node.args))
        yield Context(src, info, module_body, node.body, flow, node, qualname)
        yield from _scope(src, info, module_body, node.body, f"{qualname}.<locals>.")


def _defs(
    body: Sequence[ast.stmt],
) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    """Functions and classes defined in ``body``, including inside if/try/with blocks."""
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield stmt
        elif isinstance(stmt, ast.If | ast.Try | ast.With | ast.AsyncWith):
            for name in ("body", "orelse", "finalbody"):
                yield from _defs(getattr(stmt, name, []))
            for handler in getattr(stmt, "handlers", []):
                yield from _defs(handler.body)


def _params(args: ast.arguments) -> list[str]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    return [a.arg for a in every]


def _run_rules(rules: list[Rule], ctx: Context, path: str) -> Iterator[Finding]:
    for rule in rules:
        try:
            matches = list(rule.check(ctx))
        except RecursionError:  # absurdly deep expressions: skip this function, keep the rest
            log.warning("%s: %s skipped in %s (too deeply nested)", path, rule.code, ctx.qualname)
            continue
        for match in matches:
            yield to_finding(ctx, match, path)


def _filter(
    findings: list[Finding], src: SourceText, select: list[str] | None, ignore: list[str] | None
) -> list[Finding]:
    kept = []
    for f in findings:
        if f.code != SYNTAX_CODE and not is_selected(f.code, select, ignore):
            continue
        if f.code == SYNTAX_CODE and ignore and not is_selected(f.code, None, ignore):
            continue
        rows = {f.location.row, f.end_location.row}
        if is_suppressed(f.code, (src.line(r) for r in rows)):
            continue
        kept.append(f)
    kept.sort(key=lambda f: (f.location, f.code))
    return kept
