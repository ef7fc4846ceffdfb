"""Source text in, findings out: parse, visit every function, run the selected rules.

Pure: no I/O beyond ``analyse_path`` reading its file, no torch, nothing executed.

Fast re-analysis after an edit: the module is cut into top-level chunks (a def, a class, an
import...) at lines that start at column 0, and each chunk is parsed and analysed on its own,
with results cached by the chunk's text. An edit inside one function re-parses and re-analyses
that chunk only; findings of the other chunks are reused and moved to their new lines. When a
chunk does not parse alone (a column-0 line inside a multi-line string), it is merged with the
next; when that fails too, the whole module is parsed at once, and a real syntax error is
reported while the chunks that do parse are still analysed.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import cast

from trnlens.analysis.compile_decorators import is_compiled
from trnlens.analysis.fixes import add_missing_import, shifted, to_finding
from trnlens.analysis.hostfacts import HostFacts, host_facts
from trnlens.analysis.model import Finding, Location
from trnlens.analysis.patterns import ModuleInfo, module_info
from trnlens.analysis.rules import ALL_RULES, SYNTAX_CODE, Context, Match, Rule
from trnlens.analysis.rules.base import COMPILED_SCOPE, LOOP_SCOPE, XLA_SCOPE
from trnlens.analysis.rules.stated import stated_reason
from trnlens.analysis.source import ParseError, SourceText, decode, parse, statement_starts
from trnlens.analysis.suppression import is_selected, is_suppressed
from trnlens.analysis.testfiles import is_test_path

SYNC_PREFIX = "TRN1"  # the host-device sync rules: not reported in test code (analysis.testfiles)

log = logging.getLogger(__name__)

# Past this a file is reported, not parsed: CPython's parser needs several times the text in
# memory, and no hand-written model file comes near it.
MAX_CHARS = 20_000_000
# How many following chunks a chunk that fails to parse may absorb before the whole module is
# parsed at once instead (a long docstring with many column-0 lines).
MAX_MERGE = 8


class _LRU:
    """A small thread-safe LRU map (the language server may analyse from several threads)."""

    def __init__(self, size: int) -> None:
        self._data: OrderedDict[object, object] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: object) -> object | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: object, value: object) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)

    def resize(self, size: int) -> int:
        """Keep at most ``size`` entries from now on (the oldest go); returns the old size."""
        with self._lock:
            old, self._size = self._size, size
            while len(self._data) > size:
                self._data.popitem(last=False)
        return old


# Keyed by a digest of the chunk's text. ASTs are big: few of them are kept. What is known of a
# chunk without its AST (that it parses, its findings, its host facts) is small, and kept for
# many more: a chunk seen before (an unchanged function after an edit; code copied between the
# files of a model library, which ``# Copied from`` makes common) is then neither parsed nor
# analysed again.
# An AST is needed again only when the module's facts change (an import edited) and its chunk's
# findings must be recomputed. The language server lives long, and Python's full garbage
# collections walk every AST kept here while every request waits: after 200 of transformers'
# model files, 1.5M objects and 0.55 s a collection with 8,192 ASTs, 0.23M and 0.13 s with 1,024
# (measured). What that costs: a big file whose ASTs were pushed out re-parses once after an
# import edit (65 ms against 34 ms for the biggest of those files).
_PARSED = _LRU(1024)  # digest -> statements | ParseError
# A batch over many files keeps none (``asts_freed_per_file``).
_PARSES = _LRU(65536)  # digest -> True: the text parses on its own
_ANALYSED = _LRU(65536)  # (digest, ModuleInfo) -> findings with rows relative to the chunk
_FACTS = _LRU(65536)  # digest -> HostFacts


@contextmanager
def asts_freed_per_file() -> Iterator[None]:
    """Within this, ASTs live as long as the analysis of their file and no longer: for a batch
    (``trnlens check``), where a file is seldom analysed twice. Freed while their memory is
    still in the CPU's caches, they cost less to free than when pushed out of a cache of
    1,024 later: about a tenth of a run on transformers' 503 model files (measured, one process:
    4.5-4.9 s against 5.0-5.8 s). What a cache keeps that is small (what parses, findings,
    host facts) is kept as before."""
    size = keep_asts(0)
    try:
        yield
    finally:
        keep_asts(size)


def keep_asts(size: int) -> int:
    """Keep the ASTs of at most ``size`` chunks between analyses; returns the size before."""
    return _PARSED.resize(size)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass
class _Chunk:
    start: int  # 1-based row of the chunk's first line in the module
    text: str
    key: bytes  # _digest(text)
    parsed: list[ast.stmt] | None = None  # None: not parsed yet (it is known to parse)

    @property
    def body(self) -> list[ast.stmt]:
        """The chunk's statements, parsed on first use: only a chunk whose findings are not
        cached, or that holds imports or host facts, needs them."""
        if self.parsed is None:
            parsed = _parse_cached(self.text, self.key)
            self.parsed = [] if isinstance(parsed, ParseError) else parsed
        return self.parsed


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
        findings.append(_error(f"cannot decode file: {decode_error}", 1, 1))
    if len(text) > MAX_CHARS:
        message = f"file too large to analyse ({len(text):,} characters; limit {MAX_CHARS:,})"
        findings.append(_error(message, 1, 1))
        return _finish(findings, SourceText(""), path, select, ignore)
    chunks, error = _chunks(text)
    if error is not None:
        note = "; the rest of the file was analysed block by block" if chunks else ""
        findings.append(_error(error.message + note, error.row, error.column))
    info, import_row = _module_facts(chunks)
    for chunk in chunks:
        findings.extend(_analyse_chunk(chunk, info))
    if not info.imports_torch:
        for f in findings:
            add_missing_import(f, import_row)
    if is_test_path(path):
        findings = [f for f in findings if not f.code.startswith(SYNC_PREFIX)]
    # Most files have no finding: their lines are not split again for noqa comments.
    return _finish(findings, SourceText(text) if findings else SourceText(""), path, select, ignore)


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
        finding = _error(f"cannot read file: {exc.strerror or exc}", 1, 1)
        finding.filename = name
        return [finding]
    decoded = decode(data)
    return analyse_source(decoded.text, name, select, ignore, decode_error=decoded.decode_error)


def _error(message: str, row: int, column: int) -> Finding:
    loc = Location(row, column)
    return Finding(SYNTAX_CODE, message, loc, loc, severity="error")


# -- chunking ---------------------------------------------------------------------------------
def _parse_cached(text: str, key: bytes) -> list[ast.stmt] | ParseError:
    cached = _PARSED.get(key)
    if cached is None:
        cached = parse(text)
        _PARSED.put(key, cached)
        if not isinstance(cached, ParseError):
            _PARSES.put(key, True)
    return cached  # type: ignore[return-value]


def _chunk_if_parses(start: int, text: str) -> _Chunk | ParseError:
    """The chunk, unparsed when its text is known to parse; else parsed, or why it does not."""
    key = _digest(text)
    if _PARSES.get(key) is not None:
        return _Chunk(start, text, key)
    parsed = _parse_cached(text, key)
    return parsed if isinstance(parsed, ParseError) else _Chunk(start, text, key, parsed)


def _chunks(text: str) -> tuple[list[_Chunk], ParseError | None]:
    lines = text.splitlines(keepends=True)
    starts = statement_starts(lines)
    bounds = [*starts, len(lines)]
    chunks: list[_Chunk] = []
    i = 0
    while i < len(starts):
        members = _class_members(lines, starts[i], bounds[i + 1])
        if members is not None:
            chunks.extend(members)
            i += 1
            continue
        merged = _parse_merging(lines, starts, bounds, i, header="")
        if merged is None:
            return _whole_module(text, lines, starts)
        chunk, i = merged
        chunks.append(chunk)
    return chunks, None


def _parse_merging(
    lines: list[str], starts: list[int], bounds: list[int], i: int, header: str
) -> tuple[_Chunk, int] | None:
    """Parse ``header`` + the chunk at ``starts[i]``, absorbing following chunks while it fails.

    Returns the chunk and the index of the next unparsed start, or None when nothing parses."""
    header_rows = header.count("\n")
    for j in range(i + 1, min(i + 1 + MAX_MERGE, len(bounds))):
        text = header + "".join(lines[starts[i] : bounds[j]])
        chunk = _chunk_if_parses(starts[i] + 1 - header_rows, text)
        if not isinstance(chunk, ParseError):
            return chunk, j
    return None


# Classes longer than this are analysed member by member, so that an edit in one method re-parses
# that method only.
CLASS_SPLIT_LINES = 40


def _class_members(lines: list[str], start: int, end: int) -> list[_Chunk] | None:
    """A long class cut into its members, each parsed under a copy of the class header (so that
    qualnames and columns stay right); None when the class cannot be cut that way."""
    if end - start < CLASS_SPLIT_LINES:
        return None
    i = start
    while i < end and lines[i].startswith("@"):
        i += 1
    if i >= end or not lines[i].startswith("class ") or not _code(lines[i]).endswith(":"):
        return None  # decorators or a header spanning lines: not worth the risk
    header = "".join(lines[start : i + 1])
    body = range(i + 1, end)
    indent = next((_indent(lines[k]) for k in body if _code(lines[k])), "")
    if not indent:
        return None
    starts = [k for k in statement_starts([ln.removeprefix(indent) for ln in lines[i + 1 : end]])]
    starts = [i + 1 + k for k in starts if lines[i + 1 + k].startswith(indent)]
    if not starts:
        return None
    starts[0] = i + 1  # leading blank lines and comments go with the first member
    bounds = [*starts, end]
    chunks: list[_Chunk] = []
    k = 0
    while k < len(starts):
        merged = _parse_merging(lines, starts, bounds, k, header)
        if merged is None:
            return None
        chunk, k = merged
        chunks.append(chunk)
    return chunks


def _code(line: str) -> str:
    return line.split("#", 1)[0].strip()


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _whole_module(
    text: str, lines: list[str], starts: list[int]
) -> tuple[list[_Chunk], ParseError | None]:
    # Parsed whole, whatever its size: a valid module whose chunks do not parse on their own (a
    # string or bracket spanning several top-level blocks: diffusers' and timm's biggest files)
    # must not read as a syntax error. In the language server this runs in the analysis thread,
    # once edits pause; the per-keystroke outline never parses a big text whole (lsp/outline.py).
    whole = _chunk_if_parses(1, text)
    if not isinstance(whole, ParseError):
        return [whole], None
    # A real syntax error: analyse every top-level chunk that parses on its own.
    bounds = [*starts, len(lines)]
    chunks = []
    for k, start in enumerate(starts):
        chunk = _chunk_if_parses(start + 1, "".join(lines[start : bounds[k + 1]]))
        if not isinstance(chunk, ParseError):
            chunks.append(chunk)
    return chunks, whole


_IMPORT = re.compile(r"import\b")


def _module_facts(chunks: list[_Chunk]) -> tuple[ModuleInfo, int]:
    """Torch aliases over the whole module, and the row where a missing ``import torch`` goes."""
    # Only top-level imports count (module_info): a chunk without the word has none to parse.
    statements = [s for c in chunks if _has_word(c.text, "import", _IMPORT) for s in c.body]
    import_row = 1
    for chunk in chunks:
        stmt = chunk.body[0] if chunk.body else None
        is_doc = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        is_future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if not (is_doc or is_future):
            break
        import_row = chunk.start + (stmt.end_lineno or stmt.lineno)  # type: ignore[union-attr]
    # Only a chunk that says "cpu" can move an attribute to the host; the others are walked only
    # when they name such an attribute (an assignment there may put it back on the device).
    facts = HostFacts()
    for chunk in chunks:
        if "cpu" in chunk.text:
            facts = facts | _chunk_facts(chunk)
    if facts.host:
        for chunk in chunks:
            if "cpu" not in chunk.text and any(f"self.{a}" in chunk.text for a in facts.host):
                facts = facts | _chunk_facts(chunk)
    info = replace(module_info(statements), host_attrs=facts.host_only, host_setters=facts.setters)
    return info, import_row


def _chunk_facts(chunk: _Chunk) -> HostFacts:
    """``host_facts`` of one chunk, cached by its text: an edit walks only the chunk it changed."""
    cached = _FACTS.get(chunk.key)
    if cached is None:
        cached = host_facts(chunk.body)
        _FACTS.put(chunk.key, cached)
    return cached  # type: ignore[return-value]


# -- analysis ---------------------------------------------------------------------------------
def _analyse_chunk(chunk: _Chunk, info: ModuleInfo) -> list[Finding]:
    key = (chunk.key, info)
    cached = cast("list[Finding] | None", _ANALYSED.get(key))
    if cached is None:
        body = chunk.body
        if _only_definitions(body) and not _text_may_trigger(chunk.text, info, compiled=None):
            return []  # no function here that any rule could run on (as ``_may_trigger`` says)
        src = SourceText(chunk.text)
        cached = [f for ctx in _contexts(src, info, body) for f in _run(ctx)]
        _ANALYSED.put(key, cached)
    return [shifted(f, chunk.start - 1) for f in cached]


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _only_definitions(body: list[ast.stmt]) -> bool:
    """Only functions and classes, whose module-level context holds no name a rule waits for:
    the walk stops at a definition (its decorators are the function's)."""
    return all(isinstance(stmt, _DEFINITIONS) for stmt in body)


def _contexts(src: SourceText, info: ModuleInfo, body: list[ast.stmt]) -> Iterator[Context]:
    yield Context(src, info, body)  # module-level code (scripts, loops)
    yield from _scope(src, info, body, prefix="")


def _scope(
    src: SourceText,
    info: ModuleInfo,
    body: Sequence[ast.stmt],
    prefix: str,
    owner: ast.ClassDef | None = None,
) -> Iterator[Context]:
    for node in _defs(body):
        if isinstance(node, ast.ClassDef):
            yield from _scope(src, info, node.body, f"{prefix}{node.name}.", node)
            continue
        qualname = f"{prefix}{node.name}"
        yield Context(src, info, node.body, node, qualname, _params(node.args), owner)
        yield from _scope(src, info, node.body, f"{qualname}.<locals>.")


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


# Rules about ops a compiler would fuse; host-device sync hazards (TRN1xx) stay relevant.
FUSION_CODES = frozenset({"TRN001", "TRN002", "TRN003", "TRN004", "TRN005", "TRN006", "TRN007"})
_compiled = is_compiled  # decorated with torch.compile (rules/graphbreaks.py)


# Where a rule can find anything at all, beyond its trigger words (rules.base's scopes): the sync
# rules look only inside loops, in modules that import torch; the graph-break rules only inside
# a torch.compile'd function; the XLA rules only in modules that import torch-xla. Their
# trigger words ("to", "print", "info", "sum", "where"...) are in most functions' text, while
# few functions loop or are compiled and few modules use torch-xla: tested too, these spare the
# walk of most of the functions the words alone let through (transformers' model files).
# Every loop and comprehension says one of these.
_LOOP_WORDS = [(word, re.compile(word + r"\b")) for word in ("for", "while")]


@dataclass(frozen=True)
class _Triggers:
    """What the code of a function must contain for the rules of one scope to run there: the
    names they wait for (``Rule.triggers``), each with a pattern for it followed by a word
    boundary, and pieces of text a rule gives instead (``text_triggers``: ``.any(`` rather than
    the word "any", which prose and ``any(...)`` say everywhere)."""

    words: list[tuple[str, re.Pattern[str]]]
    texts: list[str]

    def mentioned(self, text: str) -> bool:
        # Written out (no generator, the substring test inline): this runs on every chunk.
        for word, pattern in self.words:
            if word in text and _has_word(text, word, pattern):
                return True
        for piece in self.texts:
            if piece in text:
                return True
        return False


def _trigger_words(rules: Sequence[Rule]) -> _Triggers | None:
    """The triggers of ``rules``; None when a rule runs everywhere (no triggers) or waits for a
    name that is not a word (``**``) without text triggers."""
    if not all(rule.triggers for rule in rules):
        return None
    words: set[str] = set()
    texts: set[str] = set()
    for rule in rules:
        given = getattr(rule, "text_triggers", None)
        if given:
            words.update(w for w in given if w.isidentifier())
            texts.update(w for w in given if not w.isidentifier())
        elif all(w.isidentifier() for w in rule.triggers):
            words.update(rule.triggers)
        else:
            return None
    patterns = [(word, re.compile(re.escape(word) + r"\b")) for word in sorted(words)]
    return _Triggers(patterns, sorted(texts))


def _scoped_triggers(
    rules: Sequence[Rule],
) -> dict[str | None, _Triggers | None]:
    by_scope: dict[str | None, list[Rule]] = {}
    for rule in rules:
        by_scope.setdefault(getattr(rule, "scope", None), []).append(rule)
    return {scope: _trigger_words(members) for scope, members in by_scope.items()}


_TRIGGERS = _scoped_triggers(ALL_RULES)


def _mentions_a_trigger(text: str, scope: str | None = None) -> bool:
    """Whether ``text`` holds a trigger of some rule of ``scope`` (None: rules of any scope)."""
    if scope not in _TRIGGERS:
        return False  # no rule of this scope
    triggers = _TRIGGERS[scope]
    return triggers is None or triggers.mentioned(text)


def _has_word(text: str, word: str, pattern: re.Pattern[str]) -> bool:
    r"""Whether ``word`` stands in ``text`` as a word of its own; ``pattern`` is the word then
    ``\b``. A substring test first, then that pattern, which starts with the word's letters so
    the regex engine skips ahead to them (a leading ``\b`` makes it try every position:
    about twice as slow over a big tree), then a look at the character before."""
    if word not in text:
        return False
    for match in pattern.finditer(text):
        at = match.start()
        if at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_"):
            return True
    return False


def _may_trigger(ctx: Context) -> bool:
    """False when no rule can run on this function: none of the trigger words of the rules whose
    scope it is in (any function; a loop in a module importing torch; a compiled function; any
    function of a module importing torch-xla) is in the source of its body. A word test on the
    text is a superset of the exact test on the body's names (every name in the code is a word
    of its text), and a loop's keyword is in the text of every loop, so this only spares the
    walk that computes them: on transformers' model files nine functions in ten are never
    walked. The docstring is left out (prose says "to" and "mean") unless code shares its last
    line.
    """
    func = ctx.func
    if func is None:
        return True
    lines, body = ctx.src.lines, func.body
    start, end = func.lineno - 1, func.end_lineno or len(lines)
    doc = body[0]
    if (
        isinstance(doc, ast.Expr)
        and isinstance(doc.value, ast.Constant)
        and isinstance(doc.value.value, str)
        and (len(body) == 1 or body[1].lineno > (doc.end_lineno or doc.lineno))
    ):
        text = "".join(lines[start : doc.lineno - 1]) + "".join(lines[doc.end_lineno : end])
    else:
        text = "".join(lines[start:end])
    return _text_may_trigger(text, ctx.info, _compiled(func))


# A line holding only a comment: no name of the code is on it (inside a string it is text).
_COMMENT_LINE = re.compile(r"^[ \t]*#.*\n?", re.MULTILINE)


def _text_may_trigger(text: str, info: ModuleInfo, compiled: bool | None) -> bool:
    """Whether code whose source is ``text`` may hold something a rule runs on: a trigger of a
    rule of any scope, or of the loop scope with a loop keyword in a module importing torch, or
    of the XLA scope in a module importing torch-xla, or of the compiled scope in a compiled
    function (``compiled`` None: perhaps, if the text says so: a whole chunk, which may hold
    one). Comment lines say "to", "for" and "mean" as often as code does: a text that passes is
    tested again without them (a quarter of the functions that pass on transformers' model
    files do not then)."""
    if not _words_may_trigger(text, info, compiled):
        return False
    return "#" not in text or _words_may_trigger(_COMMENT_LINE.sub("", text), info, compiled)


def _words_may_trigger(text: str, info: ModuleInfo, compiled: bool | None) -> bool:
    if _mentions_a_trigger(text):
        return True
    if (
        info.imports_torch
        and LOOP_SCOPE in _TRIGGERS
        and any(_has_word(text, word, pattern) for word, pattern in _LOOP_WORDS)
        and _mentions_a_trigger(text, LOOP_SCOPE)
    ):
        return True
    if info.imports_xla and _mentions_a_trigger(text, XLA_SCOPE):
        return True
    if compiled is None:  # decorated `torch.compile` or `torch._dynamo.optimize` (_compiled)
        compiled = "compile" in text or "optimize" in text
    return compiled and _mentions_a_trigger(text, COMPILED_SCOPE)


def _run(ctx: Context) -> Iterator[Finding]:
    """Every rule on one context. Selection is applied later, so that cached results serve any
    ``--select``; each rule is guarded so that one rule's failure costs only its own findings."""
    rules: Sequence[Rule] = ALL_RULES
    if not _may_trigger(ctx):
        return
    try:
        names = ctx.names
    except RecursionError:
        return
    compiled = ctx.func is not None and _compiled(ctx.func)
    for rule in rules:
        if rule.triggers and rule.triggers.isdisjoint(names):
            continue
        if compiled and rule.code in FUSION_CODES:
            continue  # torch.compile already fuses this function's ops into one graph
        try:
            matches = list(rule.check(ctx))
            if rule.code in FUSION_CODES:
                matches = [_unfixed_where_a_reason_is_given(ctx, m) for m in matches]
            found = [to_finding(ctx, match, "") for match in matches]
            severity = getattr(rule, "severity", None)  # hints (graph-break rules) say so
            for finding in found:
                finding.severity = severity or finding.severity
        except RecursionError:  # absurdly deep expressions: skip this function, keep the rest
            log.warning("%s skipped in %s (too deeply nested)", rule.code, ctx.qualname)
            continue
        yield from found


def _unfixed_where_a_reason_is_given(ctx: Context, match: Match) -> Match:
    """A hand-written form whose comment or docstring says why (rules/stated.py): still
    reported, without the fix that would undo the authors' reason."""
    if not match.replacements:
        return match
    reason = stated_reason(ctx, match.code)
    if reason is None:
        return match
    match.replacements, match.candidates, match.fix_message = [], [], None
    match.message += f'; no fix offered: the code says why it is written out ("{reason}")'
    return match


def _finish(
    findings: list[Finding],
    src: SourceText,
    path: str,
    select: list[str] | None,
    ignore: list[str] | None,
) -> list[Finding]:
    kept = []
    for f in findings:
        if f.code == SYNTAX_CODE:
            # Unparsable source is always reported, unless ignored by name.
            if ignore and not is_selected(f.code, None, ignore):
                continue
        elif not is_selected(f.code, select, ignore):
            continue
        rows = {f.location.row, f.end_location.row}
        if is_suppressed(f.code, (src.line(r) for r in rows)):
            continue
        f.filename = path
        kept.append(f)
    kept.sort(key=lambda f: (f.location, f.code))
    return kept
