"""Diagnostics, published per document from providers keyed by source.

Profiling publishes two kinds: hotspots (Hint, on lines above the configured share of the
function's time, saying what ran there) and failures (Error, on the line that raised). Hotspots
are Hints because a hot line is a fact, not a problem: editors keep Hints out of their problem
lists (VS Code's Problems panel, as Pylance does for unused code) and draw them faintly; and a
hotspot on a line that already has a finding is left out, since the finding then carries the
measured figures itself. Static
analysis (another module) registers its own provider under its own key, and ``publish`` sends
everything for a document together, since ``publishDiagnostics`` replaces the whole set.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from lsprotocol import types

from trnlens import memoryfigures
from trnlens.lsp import format
from trnlens.lsp.documents import ProfiledDocument
from trnlens.settings import Settings

SOURCE = "trnlens"
log = logging.getLogger(__name__)

Provider = Callable[[ProfiledDocument, Settings], list[types.Diagnostic]]


class DiagnosticsHub:
    """Collects every provider's diagnostics for a document; one failing provider costs only its
    own diagnostics."""

    def __init__(self) -> None:
        self.providers: dict[str, Provider] = {}

    def register(self, key: str, provider: Provider) -> None:
        self.providers[key] = provider

    def collect(self, doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
        found: list[types.Diagnostic] = []
        for key, provider in self.providers.items():
            try:
                found.extend(provider(doc, settings))
            except Exception:
                log.exception("diagnostics provider %s failed on %s", key, doc.uri)
        said = {d.range.start.line for d in found if d.code != "hotspot"}
        return [d for d in found if d.code != "hotspot" or d.range.start.line not in said]


def _line_range(doc: ProfiledDocument, line: int) -> types.Range:
    lines = doc.text.splitlines()
    text = lines[line] if line < len(lines) else ""
    start = len(text) - len(text.lstrip())
    end = len(text.encode("utf-16-le")) // 2
    return types.Range(types.Position(line, start), types.Position(line, max(end, start)))


def hotspots(doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
    """Information on each line whose share of its run's time reaches the threshold."""
    found = []
    for line, entry, placement in doc.line_figures():
        total = placement.line_total()
        time_us = entry.get("device_us") or 0
        if total <= 0 or time_us / total < settings.hotspot_threshold:
            continue
        result = placement.result
        share = f"{100 * time_us / total:.0f}%"
        message = (
            f"{share} of {result.qualname}'s time: {format.duration(time_us)} "
            f"{result.part_label} per step, {format.count(entry.get('dispatches'), 'dispatch')}"
        )
        ran = _what_ran(entry, result.data.get("ops") or [])
        if ran:
            message += f"\nran here: {ran}"
        if doc.is_stale(placement):
            message += "\n(stale: the function changed since this run)"
        found.append(
            types.Diagnostic(
                range=_line_range(doc, line),
                message=message,
                severity=types.DiagnosticSeverity.Hint,
                source=SOURCE,
                code="hotspot",
            )
        )
    return found


def _what_ran(entry: dict, ops: list[dict]) -> str:
    shapes = {op["name"]: format.shapes(op.get("input_shapes"), limit=1) for op in ops}
    parts = []
    for name, calls in sorted((entry.get("ops") or {}).items(), key=lambda kv: -kv[1]):
        text = f"{name} ×{int(calls)}" if calls != 1 else name
        if shapes.get(name):
            text += f" {shapes[name]}"
        parts.append(text)
    return ", ".join(parts)


def failures(doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
    """Error on the line that raised in a failed run (or on the def line when it was elsewhere)."""
    found = []
    analysis = doc.analysis()
    for placement in doc.placements.values():
        error = placement.result.error
        if not error:
            continue
        line = placement.now(placement.error_line) if placement.error_line is not None else None
        if line is None and analysis is not None:
            symbol = analysis.symbols.get(placement.result.qualname)
            line = analysis.def_line_now(symbol) if symbol else None
        if line is None:
            continue
        message = str(error.get("message"))  # the agent's message already names the type
        live = memoryfigures.out_of_memory_words(error)
        if live:  # an out-of-memory failure: what held the memory, on its own line
            message += f"\n{live}"
        if placement.error_line is None and error.get("path"):
            message += f" (raised in {error['path']}:{error.get('line')})"
        run_age = format.age(placement.result.data["created_at"])
        found.append(
            types.Diagnostic(
                range=_line_range(doc, line),
                message=f"{message}\nwhile profiling {placement.result.qualname} ({run_age})",
                severity=types.DiagnosticSeverity.Error,
                source=SOURCE,
                code=f"run-{error.get('kind', 'error')}",
            )
        )
    return found
