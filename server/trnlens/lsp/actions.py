"""Code actions: each analysis fix as a quick fix (a ``WorkspaceEdit``), and ``Measure the fix``.

A finding's fix edits are in 1-based rows and code-point columns of the analysed text; they are
converted to LSP positions (UTF-16 units) on that same text, so a line holding ``é`` or an emoji
before the pattern still gets the right range. A safe fix is the preferred action (editors apply
it with one key); an unsafe one is offered, never preferred. ``Measure the fix`` runs the
comparison (``trnlens.server.measureFix``): original, fixed and compiled, on the default target.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types

from trnlens import memoryfixes
from trnlens.lsp.analysis import Analysed, AnalysisService
from trnlens.lsp.command_ids import MEASURE_FIX
from trnlens.lsp.documents import ProfiledDocument

KINDS = [types.CodeActionKind.QuickFix]


def _key(position: types.Position) -> tuple[int, int]:
    return position.line, position.character


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return _key(a.start) <= _key(b.end) and _key(b.start) <= _key(a.end)


def _wanted(kind: str, only: Sequence[str] | None) -> bool:
    return not only or any(kind == o or kind.startswith(o + ".") for o in only)


def code_actions(
    analysis: AnalysisService, doc: ProfiledDocument, params: types.CodeActionParams
) -> list[types.CodeAction]:
    only = params.context.only
    if not _wanted(types.CodeActionKind.QuickFix, only):
        return []
    analysed: Analysed = analysis.current(doc)
    structure = doc.analysis()
    symbols = structure.symbols if structure is not None else {}
    found: list[types.CodeAction] = []
    measured: set[tuple[str, str]] = set()
    for finding in analysed.findings:
        where = analysed.range(finding)
        if not _overlaps(where, params.range):
            # elsewhere in the finding's function: only Measure the fix (from the lightbulb on
            # its def or any line, not only from the diagnostic's own menu)
            symbol = symbols.get(finding.qualname or "")
            if (
                symbol is not None
                and finding.qualname
                and finding.variant_source
                and (finding.qualname, finding.code) not in measured
                and _in_function(structure, symbol, params.range.start.line)
            ):
                measured.add((finding.qualname, finding.code))
                found.append(_measure(doc, finding.qualname, finding.code, []))
            continue
        diagnostics = [
            d
            for d in params.context.diagnostics
            if d.source == "trnlens" and d.code == finding.code and d.range == where
        ] or [analysis.diagnostic(doc, analysed, finding)]
        fix = finding.fix
        if fix is not None and fix.edits:
            edits = [
                types.TextEdit(
                    range=types.Range(
                        analysed.position(edit.location), analysed.position(edit.end_location)
                    ),
                    new_text=edit.content,
                )
                for edit in fix.edits
            ]
            safe = fix.applicability == "safe"
            found.append(
                types.CodeAction(
                    title=f"{fix.message} ({finding.code})" + ("" if safe else " (unsafe)"),
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=diagnostics,
                    is_preferred=safe,
                    edit=types.WorkspaceEdit(changes={doc.uri: edits}),
                )
            )
        qualname = finding.qualname
        if (
            finding.variant_source
            and qualname in symbols
            and (qualname, finding.code) not in measured
        ):
            measured.add((qualname, finding.code))
            found.append(_measure(doc, qualname, finding.code, diagnostics))
    found.extend(_checkpointing(doc, structure, params.range.start.line))
    return found


def _checkpointing(doc: ProfiledDocument, structure, line: int) -> list[types.CodeAction]:
    """Measure activation checkpointing, in a function whose placed run names a class to
    checkpoint (memoryfixes.py): memory against time, from the lightbulb on any of its lines."""
    if structure is None:
        return []
    found = []
    for qualname, placement in doc.placements.items():
        symbol = structure.symbols.get(qualname)
        if symbol is None or placement.result.error or not _in_function(structure, symbol, line):
            continue
        candidate = memoryfixes.checkpoint_candidate(placement.result.data)
        if candidate is None:
            continue
        arguments = {"uri": doc.uri, "qualname": qualname, "code": memoryfixes.CHECKPOINT_CODE}
        title = (
            f"Measure checkpointing {candidate.type}: {qualname}'s peak memory against its time "
            "(trnlens)"
        )
        found.append(
            types.CodeAction(
                title=title,
                kind=types.CodeActionKind.QuickFix,
                command=types.Command(title=title, command=MEASURE_FIX, arguments=[arguments]),
            )
        )
    return found


def _in_function(structure, symbol, line: int) -> bool:
    start = structure.header_line_now(symbol)
    now = structure.def_line_now(symbol)
    if start is None or now is None:
        return False
    return start <= line <= now + (symbol.end_line - symbol.def_line)


def _measure(
    doc: ProfiledDocument, qualname: str, code: str, diagnostics: list[types.Diagnostic]
) -> types.CodeAction:
    arguments = {"uri": doc.uri, "qualname": qualname, "code": code}
    title = f"Measure the fix: {qualname} vs fixed vs torch.compile (trnlens)"
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.QuickFix,
        diagnostics=diagnostics or None,
        command=types.Command(title=title, command=MEASURE_FIX, arguments=[arguments]),
    )
