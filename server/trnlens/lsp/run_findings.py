"""Measured findings in the editor: what a run's pattern checks saw, at the line that dispatched it.

Each finding of a placed run (``result["findings"]``, agent/patterns.py) becomes a diagnostic at
its line, source ``trnlens (measured)``, its measured cost in the message. Where the remedy is a
proven one-argument edit, a quick fix makes it:

- ``foreach``: the optimizer's constructor gets ``foreach=True`` (single-tensor step);
- ``set_to_none``: the ``zero_grad`` call on the finding's line gets ``set_to_none=True``;
- ``conv_bias``: the document's one convolution constructor gets ``bias=False``;
- ``num_workers``: the document's one ``DataLoader(...)`` gets ``num_workers=2``.

A fix is offered only when its target is unambiguous in the document (exactly one such
constructor); otherwise the diagnostic's advice stands alone. Padding a matmul dimension to a
multiple of 8 changes shapes the rest of the model depends on: advice only, never an edit.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator

from lsprotocol import types

from trnlens.lsp import format, markdown
from trnlens.lsp.documents import Placement, ProfiledDocument
from trnlens.settings import Settings

SOURCE = "trnlens (measured)"
CONVS = ("Conv1d", "Conv2d", "Conv3d")
# A measured finding under this share of the step is Information, not a Warning: nothing there
# is worth a user's time ("host sync: aten::item 42x per step ... 0% of the step").
WARNING_SHARE = 0.01


def severity(share: float | None, stale: bool = False) -> types.DiagnosticSeverity:
    """A measured finding's level: a stale run's is a Hint (it may no longer hold, out of the
    Problems list until the next run says again), one under ``WARNING_SHARE`` of the step is
    Information, the rest are Warnings."""
    if stale:
        return types.DiagnosticSeverity.Hint
    if share is not None and share < WARNING_SHARE:
        return types.DiagnosticSeverity.Information
    return types.DiagnosticSeverity.Warning


def provider(doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
    """A diagnostic per measured finding of each run placed on this document (a Warning, but
    see :func:`severity`)."""
    found = []
    for line, finding, placement in findings_here(doc):
        result = placement.result
        cost = (
            f"measured: {format.duration(finding['time_us'])} {result.part_label} per step, "
            f"{share_text(finding['share'])} of the step ({result.qualname}, "
            f"{format.age(result.data['created_at'])})"
        )
        if _applied(doc.text, finding, line):
            continue  # its quick fix is in the text: the warning would outlive its cause
        stale = doc.is_stale(placement)
        if stale:
            cost += " · stale: the function or its inputs changed since"
        found.append(
            types.Diagnostic(
                range=line_range(doc.text, line),
                message=f"{finding['message']}\n{cost}",
                severity=severity(finding.get("share"), stale),
                source=SOURCE,
                code=finding["id"],
                data={"fix": finding.get("fix"), "details": finding.get("details") or {}},
            )
        )
    return found


def share_text(share: float) -> str:
    """``25%``; under 1%, one decimal (``0.6%``: a "1%" beside an Information would read as
    over the bar), ``under 0.1%`` below that (never "0%" of a step that it is part of)."""
    if share >= WARNING_SHARE:
        return f"{100 * share:.0f}%"
    # rounded down: 0.996% rounded would read "1.0%" on an Information, under a bar of 1%
    return f"{math.floor(1000 * share) / 10:.1f}%" if share >= 0.001 else "under 0.1%"


def findings_here(doc: ProfiledDocument) -> Iterator[tuple[int, dict, Placement]]:
    """(current 0-based line, finding, placement) for each finding on this document."""
    for placement in doc.placements.values():
        if placement.result.error:
            continue
        for finding in placement.result.data.get("findings") or []:
            if finding.get("path") != doc.relpath or not finding.get("line"):
                continue
            now = placement.now(finding["line"] - 1)
            if now is not None:
                yield now, finding, placement


def code_actions(doc: ProfiledDocument, params: types.CodeActionParams) -> list[types.CodeAction]:
    """Quick fixes for the measured diagnostics the editor sent with this request."""
    actions = []
    for diagnostic in params.context.diagnostics:
        if diagnostic.source != SOURCE or not isinstance(diagnostic.data, dict):
            continue
        fix = diagnostic.data.get("fix")
        made = _edit(doc.text, fix, diagnostic.range.start.line, diagnostic.data)
        if made is None:
            continue
        title, edit = made
        actions.append(
            types.CodeAction(
                title=f"{title} ({diagnostic.code}, measured)",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                is_preferred=True,
                edit=types.WorkspaceEdit(changes={doc.uri: [edit]}),
            )
        )
    return actions


_FIXED_BY = {"set_to_none": "True", "foreach": "True", "conv_bias": "False", "num_workers": None}


def _applied(text: str, finding: dict, line: int) -> bool:
    """Whether the finding's one-keyword fix is already in its one target call."""
    fix = finding.get("fix")
    if fix not in _FIXED_BY:
        return False
    calls = _targets(text, fix, line, {"details": finding.get("details") or {}})
    if calls is None or len(calls) != 1:
        return False
    name = "bias" if fix == "conv_bias" else fix
    keyword = next((k for k in calls[0].keywords if k.arg == name), None)
    if keyword is None:
        return False
    wanted = _FIXED_BY[fix]
    if wanted is None:  # num_workers: any positive count answers it
        value = keyword.value
        return isinstance(value, ast.Constant) and isinstance(value.value, int) and value.value > 0
    return ast.unparse(keyword.value) == wanted


def _targets(text: str, fix, line: int, data: dict) -> list[ast.Call] | None:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None  # mid-edit: the next request has a parse
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    if fix == "set_to_none":
        return [c for c in calls if _name(c.func) == "zero_grad" and c.lineno == line + 1]
    if fix == "foreach":
        optimizer = (data.get("details") or {}).get("optimizer")
        return [c for c in calls if optimizer and _name(c.func) == optimizer]
    if fix == "conv_bias":
        return [c for c in calls if _name(c.func) in CONVS]
    if fix == "num_workers":
        return [c for c in calls if _name(c.func) == "DataLoader"]
    return None


def _edit(text: str, fix, line: int, data: dict) -> tuple[str, types.TextEdit] | None:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None  # mid-edit: the next request has a parse
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    if fix == "set_to_none":
        on_line = [c for c in calls if _name(c.func) == "zero_grad" and c.lineno == line + 1]
        return _keyword(text, on_line, "set_to_none", "True", "Set gradients to None")
    if fix == "foreach":
        optimizer = (data.get("details") or {}).get("optimizer")
        made = [c for c in calls if optimizer and _name(c.func) == optimizer]
        return _keyword(text, made, "foreach", "True", f"Use {optimizer}(foreach=True)")
    if fix == "conv_bias":
        convs = [c for c in calls if _name(c.func) in CONVS]
        return _keyword(text, convs, "bias", "False", "Build the convolution with bias=False")
    if fix == "num_workers":
        loaders = [c for c in calls if _name(c.func) == "DataLoader"]
        return _keyword(text, loaders, "num_workers", "2", "Load batches in 2 worker processes")
    return None


def _keyword(text, candidates, name, value, title):
    """Sets ``name=value`` in the one candidate call (replacing its value, or appending it)."""
    if len(candidates) != 1:
        return None  # none, or ambiguous: advice only
    call = candidates[0]
    lines = text.splitlines()
    existing = next((k for k in call.keywords if k.arg == name), None)
    if existing is not None:
        node = existing.value
        if ast.unparse(node) == value:
            return None
        start = ast_position(lines, node.lineno, node.col_offset)
        end = ast_position(lines, node.end_lineno, node.end_col_offset)
        return title, types.TextEdit(types.Range(start, end), value)
    if any(k.arg is None for k in call.keywords) or any(
        isinstance(a, ast.Starred) for a in call.args
    ):
        return None  # **kwargs / *args may already carry it
    # Insert before the closing parenthesis (end_col_offset is just past it).
    end = ast_position(lines, call.end_lineno, call.end_col_offset - 1)
    before = lines[call.end_lineno - 1].encode()[: call.end_col_offset - 1].decode().rstrip()
    separator = "" if before.endswith(("(", ",")) else ", "
    if before.endswith(","):
        separator = " "
    return title, types.TextEdit(types.Range(end, end), f"{separator}{name}={value}")


def _name(func) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def ast_position(lines: list[str], lineno: int, byte_col: int) -> types.Position:
    """ast's (1-based line, UTF-8 byte column) as an LSP position (UTF-16 units)."""
    text = lines[lineno - 1] if lineno - 1 < len(lines) else ""
    prefix = text.encode()[:byte_col].decode(errors="ignore")
    return types.Position(lineno - 1, len(prefix.encode("utf-16-le")) // 2)


def line_range(text: str, line: int) -> types.Range:
    """0-based ``line`` of ``text`` from its first non-blank character to its end (UTF-16)."""
    lines = text.splitlines()
    body = lines[line] if 0 <= line < len(lines) else ""
    start = len(body) - len(body.lstrip())
    end = len(body.encode("utf-16-le")) // 2
    return types.Range(types.Position(line, start), types.Position(line, max(end, start)))


# Static rules that claim unfused code: several dispatches where one fused op would do.
UNFUSED_RULES = ("TRN001", "TRN002", "TRN003", "TRN004", "TRN005", "TRN006", "TRN007")


def static_verdict(doc: ProfiledDocument, code: str, first: int, last: int, dispatches) -> str:
    """What a run says of a static finding on lines ``first..last`` (0-based, inclusive) that
    it measured: a measured finding there confirms it; for the unfused-code rules, several
    dispatches confirm it and one (fused by the library, or compiled) clears it."""
    for line, finding, _ in findings_here(doc):
        if first <= line <= last:
            return f"confirmed by a run ({finding['id']} measured here)"
    if code in UNFUSED_RULES:
        if dispatches > 1:
            return f"confirmed by a run ({format.count(dispatches, 'dispatch')} here)"
        return "cleared by a run (one dispatch here: the work ran fused)"
    return ""


def lens_label(result) -> str | None:
    """'MFU 31%' for a Neuron run whose device summary was read (explorer/summary.py)."""
    device = result.data.get("device_summary") or {}
    mfu = device.get("mfu_percent")
    return None if mfu is None else f"MFU {mfu:.0f}%"


def hover_lines(data: dict) -> list[str]:
    """Why the mode ran, and the Neuron device summary with Explorer's recommendations."""
    lines = []
    reason = data.get("mode_reason")
    if reason and reason != "requested":
        lines += ["", f"mode {markdown.code(data.get('mode'))}: {markdown.text(reason)}"]
    device = data.get("device_summary")
    if device:
        figures = [
            f"{name} {float(device[key]):.0f}%"
            for name, key in (
                ("MFU", "mfu_percent"),
                ("HFU", "hfu_percent"),
                ("MBU", "mbu_percent"),
            )  # fmt: skip
            if device.get(key) is not None
        ]
        if device.get("total_time_s") is not None:
            figures.append(f"total {format.duration(device['total_time_s'] * 1e6)}")
        if device.get("average_dma_size_bytes") is not None:
            figures.append(f"average DMA {device['average_dma_size_bytes']:.0f} B")
        lines += ["", f"**Neuron device summary** (Neuron Explorer): {' · '.join(figures)}"]
        # What a stored result carries is escaped: a result file is data, never markup.
        advice = device.get("recommendations") or []
        lines += [f"- {markdown.text(r.get('message'))}" for r in advice]
    return lines
