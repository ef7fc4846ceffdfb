"""Hovers on a profiled line or function: its ops as a Markdown table, the run's provenance.

On a measured line: the ops that line dispatched, with each op's time apportioned by the line's
share of that op's calls. On a function's header: the run's ops, most expensive first. Both end
with the run's backend, device, target, mode and age, a link to the chrome trace and, for a
Neuron run, its NEFF/NTFF pairs and runtime traces with their sizes.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from trnlens.agent import stability
from trnlens.lsp import compiled, format, markdown, rank_hints, run_findings
from trnlens.lsp.documents import Placement, ProfiledDocument
from trnlens.lsp.report import hover_link as report_link

MAX_OPS = 15


def hover(
    doc: ProfiledDocument, position: types.Position, artifacts: Path | None
) -> types.Hover | None:
    for line, entry, placement in doc.line_figures():
        if line == position.line:
            return _markdown(_line_table(entry, placement) + _footer(doc, placement, artifacts))
    analysis = doc.analysis()
    symbol = analysis.symbol_at(position.line) if analysis else None
    placement = doc.placements.get(symbol.qualname) if symbol else None
    if placement is None:
        return None
    return _markdown(_function_table(placement) + _footer(doc, placement, artifacts))


def _markdown(text: str) -> types.Hover:
    return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, text))


def _escape(text: str) -> str:
    return markdown.text(text)


def _header(placement: Placement) -> list[str]:
    device = markdown.text(placement.result.device_label)
    return [f"| op | calls | CPU | {device} | shapes |", "|---|---:|---:|---:|---|"]


def _line_table(entry: dict, placement: Placement) -> str:
    result = placement.result
    ops = {op["name"]: op for op in result.data.get("ops") or []}
    total = placement.line_total()
    share = f"{100 * (entry.get('device_us') or 0) / total:.0f}% · " if total else ""
    rows = [
        f"**line {entry['line']}** of {markdown.code(result.qualname)}: {share}"
        f"{format.duration(entry.get('device_us'))} {result.device_label} · "
        f"{format.duration(entry.get('cpu_us'))} CPU · "
        f"{format.count(entry.get('dispatches'), 'dispatch')} per step",
        "",
        *_header(placement),
    ]
    for name, calls in sorted((entry.get("ops") or {}).items(), key=lambda kv: -kv[1]):
        op = ops.get(name, {})
        part = calls / op["calls"] if op.get("calls") else 0
        rows.append(
            f"| {markdown.code(name)} | {calls:g}"
            f" | {format.duration(op.get('self_cpu_us', 0) * part)}"
            f" | {format.duration(op.get('self_device_us', 0) * part)}"
            f" | {_escape(format.shapes(op.get('input_shapes'), limit=1))} |"
        )
    rows.append("")
    rows.append("_op times are the run's per-step self times, shared out by this line's calls_")
    return "\n".join(rows)


def _function_table(placement: Placement) -> str:
    result = placement.result
    if result.error:
        message = _escape(str(result.error.get("message")))
        return f"**{markdown.text(result.qualname)}** failed: {message}"
    ops = sorted(result.data.get("ops") or [], key=lambda op: -(op.get("self_device_us") or 0))
    rows = [
        f"**{markdown.text(result.qualname)}**: {format.headline(result)} per step",
        "",
        *_header(placement),
    ]
    for op in ops[:MAX_OPS]:
        rows.append(
            f"| {markdown.code(op['name'])} | {op.get('calls', 0):g}"
            f" | {format.duration(op.get('self_cpu_us'))}"
            f" | {format.duration(op.get('self_device_us'))}"
            f" | {_escape(format.shapes(op.get('input_shapes')))} |"
        )
    if len(ops) > MAX_OPS:
        rows.append(f"| … {len(ops) - MAX_OPS} more | | | | |")
    rows.extend(compiled.hover_lines(result))  # a compiled run's graphs
    rows.extend(rank_hints.hover_lines(result))  # a multi-rank run's ranks
    return "\n".join(rows)


def _footer(doc: ProfiledDocument, placement: Placement, artifacts: Path | None) -> str:
    data = placement.result.data
    lines = [
        "",
        "",
        f"backend {markdown.code(data.get('backend'))} · device {markdown.code(data.get('device'))}"
        f" · target {markdown.code(data.get('target'))} · mode {markdown.code(data.get('mode'))}"
        f" · {format.age(data['created_at'])}",
        *run_findings.hover_lines(data),
    ]
    if doc.is_stale(placement):
        lines.append("")
        lines.append("**stale**: the function's source changed since this run")
    if (data.get("stability") or {}).get("noisy"):  # the warnings say why and what to do
        unstable = [w for w in data.get("warnings") or [] if stability.is_stability_warning(w)]
        lines.extend(["", *(f"**not stable**: {_escape(w)}" for w in unstable)])
    trace = next((a for a in data.get("artifacts") or [] if a.get("kind") == "chrome_trace"), None)
    if trace and artifacts is not None:
        run_dir = (artifacts / placement.result.run_id).resolve()
        path = (run_dir / str(trace.get("path"))).resolve()
        if path.is_relative_to(run_dir):  # a planted result cannot link outside its run
            lines.append("")
            lines.append(f"[chrome trace]({path.as_uri()}) (open in Perfetto or chrome://tracing)")
    if artifacts is not None:
        lines.extend(_neuron_lines(artifacts / placement.result.run_id))
        lines.extend(["", report_link(doc, placement)])
    return "\n".join(lines)


def _neuron_lines(run_dir: Path) -> list[str]:
    """The run's NEFF/NTFF pairs and runtime traces with sizes (nothing when it has none)."""
    from trnlens.explorer import artifacts as neuron_artifacts

    profile = neuron_artifacts.find(run_dir)
    if not profile.found:
        return []
    return ["", "**Neuron profile** (`trnlens explorer` opens it in Neuron Explorer):", ""] + (
        neuron_artifacts.summary_lines(profile)
    )
