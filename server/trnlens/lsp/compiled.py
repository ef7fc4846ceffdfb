"""What torch.compile did, shown where the code is (a run's ``compile`` field, see compilelog.py).

- a diagnostic at each graph-break line: ``graph break: <reason>; 2 graphs, 2 dispatches per
  step`` (Warning; dynamo's hints follow);
- a diagnostic on the function for each recompilation in the measured window, with the guard
  that failed (Warning: the measured figures include a compile);
- the first call's compile time on the lens of the compiled run, the graphs in its hover;
- the static graph-break hints (TRN2xx, analysis/rules/graphbreaks.py) say whether a compiled run
  of their function confirmed them (a break on their lines) or cleared them.

Break lines are anchored like measured lines (``documents.compiled_lines``), so they follow edits.
"""

from __future__ import annotations

from lsprotocol import types

from trnlens.analysis import Finding
from trnlens.lsp import format, markdown
from trnlens.lsp.diagnostics import SOURCE, _line_range
from trnlens.lsp.documents import Placement, ProfiledDocument
from trnlens.results import Result
from trnlens.settings import Settings

STATIC_PREFIX = "TRN2"  # the static graph-break rules


def info(result: Result) -> dict | None:
    data = result.data.get("compile")
    return data if isinstance(data, dict) and not result.error else None


def _shape(result: Result, data: dict) -> str:
    """'2 graphs, 2 dispatches per step'."""
    graphs = data.get("graphs_per_call") or 0
    parts = [f"{graphs} graph" + ("" if graphs == 1 else "s")]
    if result.data.get("dispatches_per_step") is not None:
        parts.append(f"{format.count(result.data['dispatches_per_step'], 'dispatch')} per step")
    return ", ".join(parts)


def diagnostics(doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
    """The diagnostics hub's provider: breaks at their lines, measured recompiles on the def."""
    found: list[types.Diagnostic] = []
    analysis = doc.analysis()
    for placement in doc.placements.values():
        result = placement.result
        data = info(result)
        if data is None:
            continue
        age = format.age(result.data["created_at"])
        stale = "\n(stale: the function changed since this run)" if doc.is_stale(placement) else ""
        for b in data.get("breaks") or []:
            if b.get("path") != doc.relpath or not isinstance(b.get("line"), int):
                continue
            line = placement.now(b["line"] - 1)
            if line is None:
                continue
            message = f"graph break: {b['reason']}; {_shape(result, data)}"
            hints = b.get("hints") or []
            if hints:
                message += "\nhint: " + "\nhint: ".join(hints[:2])
            message += f"\n(compiled run of {result.qualname}, {age}){stale}"
            found.append(_warning(doc, line, message, "graph-break"))
        measured = [r for r in data.get("recompiles") or [] if r.get("phase") == "measured"]
        symbol = analysis.symbols.get(result.qualname) if analysis else None
        def_line = analysis.def_line_now(symbol) if analysis and symbol else None
        if measured and def_line is not None:
            guards = "; ".join(dict.fromkeys(r["guard"] for r in measured))
            count = len(measured)
            message = (
                f"recompiled {count} time{'s' if count != 1 else ''} in the measured window "
                f"(the figures include a compile): guard failed: {guards}\n"
                f"(compiled run of {result.qualname}, {age}){stale}"
            )
            found.append(_warning(doc, def_line, message, "recompile"))
    return found


def _warning(doc: ProfiledDocument, line: int, message: str, code: str) -> types.Diagnostic:
    return types.Diagnostic(
        range=_line_range(doc, line),
        message=message,
        severity=types.DiagnosticSeverity.Warning,
        source=SOURCE,
        code=code,
    )


def lens_text(result: Result) -> str | None:
    """'compiled in 16.8 s · 2 graphs' for the lens of a compiled run."""
    data = info(result)
    if data is None:
        return None
    parts = []
    times = data.get("compile_time_us") or {}
    if times.get("total_us") is not None:
        reused = " (earlier run)" if data.get("reused_from") else ""
        parts.append(f"compiled in {format.duration(times['total_us'])}{reused}")
    graphs = data.get("graphs_per_call") or 0
    breaks = len(data.get("breaks") or [])
    parts.append(f"{graphs} graph" + ("" if graphs == 1 else "s"))
    if breaks:
        parts.append(f"{breaks} break" + ("" if breaks == 1 else "s"))
    return " · ".join(parts)


def hover_lines(result: Result) -> list[str]:
    """Markdown for the function hover: compile time and each graph with its ops."""
    data = info(result)
    if data is None:
        return []
    # Everything below comes from a result.json, which someone else may have written: as text.
    rows = ["", "", "**torch.compile**: " + markdown.text(lens_text(result) or "")]
    times = data.get("compile_time_us") or {}
    if times.get("tracing_us") is not None and times.get("backend_us") is not None:
        rows.append(
            f"first call compile: tracing {format.duration(times['tracing_us'])}, backend "
            f"{format.duration(times['backend_us'])}"
        )
    rows.append("")
    rows.append("| graph | where | ops |")
    rows.append("|---:|---|---:|")
    names_lines = []
    for i, graph in enumerate(data.get("graphs") or [], 1):
        where = f"{graph.get('path')}:{graph.get('line')}" if graph.get("path") else ""
        if graph.get("phase") != "first_call":
            where += f" ({graph.get('phase')})"
        rows.append(f"| {i} | {markdown.code(where)} | {markdown.text(graph.get('ops'))} |")
        names = graph.get("op_names")
        if names:
            # under the table, not in a cell: a long list wrapped a narrow hover's cells
            # mid-name and mid-number
            names_lines.append(f"graph {i}: {markdown.text(', '.join(map(str, names)))}")
    if names_lines:
        rows.extend(["", *(f"{line}  " for line in names_lines)])
    for r in data.get("recompiles") or []:
        phase, guard = markdown.text(r.get("phase")), markdown.text(r.get("guard"))
        rows.append(f"\nrecompiled ({phase}): {guard}")
    return rows


def static_verdict(doc: ProfiledDocument, finding: Finding) -> str | None:
    """For a static graph-break hint: what the latest compiled run of its function said."""
    if not finding.code.startswith(STATIC_PREFIX) or not finding.lines:
        return None
    placement: Placement | None = doc.placements.get(finding.qualname or "")
    if placement is None:
        return None
    data = info(placement.result)
    if data is None or not (data.get("compiled_in_run") or data.get("reused_from")):
        return None
    first, last = finding.lines[0] - 1, finding.lines[1] - 1
    age = format.age(placement.result.data["created_at"])
    for b in data.get("breaks") or []:
        if b.get("path") != doc.relpath or not isinstance(b.get("line"), int):
            continue
        now = placement.now(b["line"] - 1)
        if now is not None and first <= now <= last:
            return f"confirmed by the compiled run ({age}): {b['reason']}"
    return f"cleared by the compiled run ({age}): no graph break on this line"
