"""A run refused because the function needs arguments: said briefly, shown where it happened, fixed.

The agent's message is a code template (what to write and where). A toast squashes it into one
paragraph, so the user is told one sentence instead; the function's lens reads ``failed: needs
inputs``; a Warning diagnostic (code ``missing-inputs``) sits on its name until the directive is
there or a run succeeds; and its quick fix writes the template into the file: an inputs factory
above the function and the ``# trnlens: inputs=...`` directive right above its first decorator
(or ``def``), so that the next click profiles. The factory makes one tensor per parameter
without a default: integer token ids for ``*_ids`` and ``labels`` (``torch.randint``), ones for
``*_mask``, ``torch.randn`` otherwise; its shapes are a starting point, said so in a comment.
When the file already holds a factory that fits the function (no required parameters, and it
returns as many values as the function takes, named for its parameters, or already named by an
``inputs=`` directive), the quick fix only adds the directive naming it: the user's own inputs
are better than made-up ones.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from lsprotocol import types

from trnlens.agent import sources
from trnlens.lsp.documents import ProfiledDocument
from trnlens.lsp.placement import has_directive
from trnlens.settings import Settings

CODE = "missing-inputs"
SOURCE = "trnlens"
AGENT_TYPE = "InputsMissing"  # the agent's error type for it (agent/runner.py)
# Parameters that usually scale the last dimension: a vector, not a matrix.
_VECTOR_NAMES = re.compile(r"^(w|b|weight|bias|gamma|beta|scale|shift|g)(_\w+)?$")
SHAPE, VECTOR = "(8, 64)", "(64,)"
# Token ids and their masks index embeddings: integers, small enough for a tiny vocabulary.
_IDS_NAMES = re.compile(r"^(\w+_)?ids$|^labels?$")
_MASK_NAMES = re.compile(r"^(\w+_)?mask$")
IDS = "torch.randint(0, 100, (2, 16))"
MASK = "torch.ones(2, 16, dtype=torch.long)"


@dataclass(frozen=True)
class InputsFailure:
    """The last run of a function stopped because it has no inputs (kept per document)."""

    qualname: str
    message: str  # the one-sentence form


def is_missing_inputs(error: dict) -> bool:
    return error.get("kind") == "usage" and error.get("type") == AGENT_TYPE


def short_message(message: str) -> str:
    """The agent's first sentence (its template follows after a blank line)."""
    head = message.split("\n\n", 1)[0]
    head = head.split(". Add a factory", 1)[0].rstrip(".")
    return f"{head}: use the quick fix on its name (Add an inputs factory) to add one"


def _definition(doc: ProfiledDocument, qualname: str) -> ast.AST | None:
    try:
        tree = sources.parse(doc.text)
    except (SyntaxError, ValueError):
        return None
    for name, node, _ in sources.iter_definitions(tree):
        if name == qualname:
            return node
    return None


def has_inputs_directive(doc: ProfiledDocument, qualname: str) -> bool:
    analysis = doc.analysis()
    symbol = analysis.symbols.get(qualname) if analysis else None
    if analysis is None or symbol is None:
        return False
    now = analysis.def_line_now(symbol)
    if now is None:
        return False
    start = now - (symbol.def_line - symbol.start_line)
    return has_directive(doc.text.splitlines(), start)


def factory_text(doc: ProfiledDocument, qualname: str, name: str) -> str | None:
    """The factory's source, from the function's parameters; None when it is not found."""
    node = _definition(doc, qualname)
    if node is None:
        return None
    if isinstance(node, ast.ClassDef):
        forward = next(
            (n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None
        )
        tensors = _tensors(forward, skip_self=True) if forward else f"torch.randn{SHAPE}"
        body = f"return {qualname.split('.')[0]}(), ({tensors},)  # (instance, args)"
    elif "." in qualname:  # a method: the factory gives the instance and the arguments
        cls = qualname.rsplit(".", 1)[0]
        body = f"return {cls}(), ({_tensors(node, skip_self=True)},)  # (instance, args)"
    else:
        tensors = _tensors(node)
        args = f"({tensors},)" if tensors.count("torch.") == 1 else f"({tensors})"
        body = f"return {args}  # one per parameter"
    return (
        f"def {name}():\n"
        f"    # shapes to adjust to what {qualname.split('.')[-1]} expects\n"
        f"    {body}\n"
    )


def _tensors(node: ast.AST, skip_self: bool = False) -> str:
    args = node.args  # type: ignore[attr-defined]
    positional = [*args.posonlyargs, *args.args]
    if skip_self and positional:
        positional = positional[1:]
    needed = _required(node, skip_self)
    return ", ".join(_tensor(name) for name in needed) or f"torch.randn{SHAPE}"


def _tensor(name: str) -> str:
    if _IDS_NAMES.match(name):
        return IDS
    if _MASK_NAMES.match(name):
        return MASK
    return f"torch.randn{VECTOR if _VECTOR_NAMES.match(name) else SHAPE}"


def _required(node: ast.AST, skip_self: bool = False) -> list[str]:
    """The names of the parameters without a default (``self`` left out for a method)."""
    args = node.args  # type: ignore[attr-defined]
    positional = [*args.posonlyargs, *args.args]
    if skip_self and positional:
        positional = positional[1:]
    needed = positional[: len(positional) - len(args.defaults)] if args.defaults else positional
    return [a.arg for a in needed]


def existing_factory(doc: ProfiledDocument, qualname: str) -> str | None:
    """A module-level function of the document that fits as ``qualname``'s inputs factory (a
    plain function only): no required parameters, and its returns give as many values as the
    function takes. One already named by an ``inputs=`` directive wins, then one named for the
    function's parameters (``ids`` for ``input_ids``) or inputs; None when none fits."""
    try:
        tree = sources.parse(doc.text)
    except (SyntaxError, ValueError):
        return None
    target = next((n for q, n, _ in sources.iter_definitions(tree) if q == qualname), None)
    if not isinstance(target, ast.FunctionDef | ast.AsyncFunctionDef) or "." in qualname:
        return None
    wanted = _required(target)
    if not wanted:
        return None
    directed = set(re.findall(r"#\s*trnlens:.*?\binputs\s*=\s*([A-Za-z_]\w*)", doc.text))
    words = {w for name in [*wanted, qualname] for w in name.lower().split("_") if len(w) > 1}
    best: tuple[int, str] | None = None
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name == qualname or _required(node):
            continue
        arity = _returned_count(node)
        if arity is None or not (arity == len(wanted) or (arity == -1 and len(wanted) == 1)):
            continue
        name = node.name.lower()
        score = 3 if node.name in directed else 0
        score += 2 if words & set(name.split("_")) else 0
        score += 1 if any(w in name for w in ("input", "args", "batch", "example")) else 0
        if score == 0 and arity < 2:
            continue  # a lone value from an unrelated helper (a model builder) is no inputs
        if best is None or score > best[0]:
            best = (score, node.name)
    return best[1] if best else None


def _returned_count(node: ast.FunctionDef) -> int | None:
    """How many values the function's returns give: a tuple's length, -1 for one value that is
    no tuple literal; None when its returns disagree or it returns nothing."""
    counts = set()
    for inner in ast.walk(node):
        if (
            isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            and inner is not node
        ):
            continue
        if isinstance(inner, ast.Return) and inner.value is not None:
            value = inner.value
            if (  # ((args...), {kwargs}): the agent's other form
                isinstance(value, ast.Tuple)
                and len(value.elts) == 2
                and isinstance(value.elts[0], ast.Tuple)
                and isinstance(value.elts[1], ast.Dict)
            ):
                value = value.elts[0]
            counts.add(len(value.elts) if isinstance(value, ast.Tuple) else -1)
    return counts.pop() if len(counts) == 1 else None


def factory_name(doc: ProfiledDocument, qualname: str) -> str:
    base = qualname.replace(".", "_").lower() + "_inputs"  # the agent's template's name
    analysis = doc.analysis()
    taken = set(analysis.symbols) if analysis else set()
    taken |= set(re.findall(r"^\s*def\s+(\w+)", doc.text, re.MULTILINE))
    name, n = base, 2
    while name in taken:
        name, n = f"{base}{n}", n + 1
    return name


def quick_fix_edit(doc: ProfiledDocument, qualname: str) -> types.WorkspaceEdit | None:
    """Factory above the function (its decorators and comments), directive right above it."""
    analysis = doc.analysis()
    symbol = analysis.symbols.get(qualname) if analysis else None
    if analysis is None or symbol is None or _nested(qualname):
        return None
    now = analysis.def_line_now(symbol)
    if now is None:
        return None
    start = now - (symbol.def_line - symbol.start_line)
    lines = doc.text.splitlines()
    # a line always matches: the pattern may match nothing
    indent = re.match(r"[ \t]*", lines[start]).group(0) if start < len(lines) else ""  # type: ignore[union-attr]
    reused = existing_factory(doc, qualname)
    if reused is not None:
        return types.WorkspaceEdit(
            changes={doc.uri: [_insert(start, f"{indent}# trnlens: inputs={reused}\n")]}
        )
    name = factory_name(doc, qualname)
    factory = factory_text(doc, qualname, name)
    if factory is None:
        return None
    top = start
    while top > 0 and lines[top - 1].lstrip().startswith("#"):
        top -= 1  # the comments that belong to the function stay with it
    # A method's factory and directive go at the class's level: the factory is module-level.
    edits = []
    if symbol.kind == "method":
        cls = analysis.symbols.get(qualname.rsplit(".", 1)[0])
        cls_now = analysis.def_line_now(cls) if cls else None
        if cls is None or cls_now is None:
            return None
        cls_top = cls_now - (cls.def_line - cls.start_line)
        edits.append(_insert(cls_top, factory + "\n\n"))
    else:
        edits.append(_insert(top, factory + "\n\n"))
    edits.append(_insert(start, f"{indent}# trnlens: inputs={name}\n"))
    return types.WorkspaceEdit(changes={doc.uri: edits})


def _nested(qualname: str) -> bool:
    return qualname.count(".") > 1


def _insert(line: int, text: str) -> types.TextEdit:
    position = types.Position(line, 0)
    return types.TextEdit(range=types.Range(position, position), new_text=text)


def _name_range(doc: ProfiledDocument, qualname: str) -> types.Range | None:
    analysis = doc.analysis()
    symbol = analysis.symbols.get(qualname) if analysis else None
    now = analysis.def_line_now(symbol) if analysis and symbol else None
    if symbol is None or now is None:
        return None
    lines = doc.text.splitlines()
    text = lines[now] if now < len(lines) else ""
    short = qualname.rsplit(".", 1)[-1]
    column = text.find(short, symbol.def_column)
    if column < 0:
        column, end = symbol.def_column, len(text)
    else:
        end = column + len(short)
    return types.Range(types.Position(now, column), types.Position(now, end))


def provider(doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
    """A Warning on the name of each function whose last run needed inputs, until it has them."""
    found = []
    for qualname, failure in list(doc.inputs_failures.items()):
        if has_inputs_directive(doc, qualname):
            continue
        where = _name_range(doc, qualname)
        if where is None:
            continue
        found.append(
            types.Diagnostic(
                range=where,
                message=failure.message,
                severity=types.DiagnosticSeverity.Warning,
                source=SOURCE,
                code=CODE,
            )
        )
    return found


def code_actions(doc: ProfiledDocument, params: types.CodeActionParams) -> list[types.CodeAction]:
    if params.context.only and not any(
        types.CodeActionKind.QuickFix.startswith(o) for o in params.context.only
    ):
        return []
    found = []
    for qualname in doc.inputs_failures:
        where = _name_range(doc, qualname)
        if where is None or has_inputs_directive(doc, qualname):
            continue
        asked = params.range
        if where.start.line > asked.end.line or asked.start.line > where.end.line:
            continue
        edit = quick_fix_edit(doc, qualname)
        if edit is None:
            continue
        diagnostics = [d for d in params.context.diagnostics if d.code == CODE and d.range == where]
        reused = existing_factory(doc, qualname)
        title = (
            f"Use {reused}() as the inputs of {qualname} (trnlens)"
            if reused
            else f"Add an inputs factory for {qualname} (trnlens)"
        )
        found.append(
            types.CodeAction(
                title=title,
                kind=types.CodeActionKind.QuickFix,
                diagnostics=diagnostics or None,
                is_preferred=True,
                edit=edit,
            )
        )
    return found
