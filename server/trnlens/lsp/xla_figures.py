"""What an XLA run found, shown where the code is (a run's ``xla`` field, agent/xla/):

- on the lens: ``1 graph/step · recompiled 24x (shape, :21) · 1 CPU fallback · 1 forced execution``;
- a hint at the end of each line of the step: ``3 IR nodes · graph 1`` and, where it applies,
  ``CPU fallback aten::nonzero``, ``forced execution (aten::_local_scalar_dense)``,
  ``recompiles: shape``;
- a diagnostic (Warning) at each fallback, forced execution and recompilation line;
- the figures in the function's hover.

The lines are anchored like measured lines (``documents.xla_lines``), so they follow edits.
"""

from __future__ import annotations

from lsprotocol import types

from trnlens.lsp import format, markdown
from trnlens.lsp.diagnostics import SOURCE, _line_range
from trnlens.lsp.documents import ProfiledDocument
from trnlens.lsp.hints import utf16_length
from trnlens.results import Result
from trnlens.settings import Settings


def info(result: Result) -> dict | None:
    data = result.data.get("xla")
    return data if isinstance(data, dict) and not result.error else None


def _n(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _plural(count: float, noun: str) -> str:
    return f"{_n(count)} {noun}" + ("" if count == 1 else "s")


def lens_text(result: Result) -> str | None:
    """'1 graph/step · recompiled 24x (shape, :21) · 1 CPU fallback' for the lens."""
    x = info(result)
    if x is None:
        return None
    graphs = x["per_step"]["graphs"]
    parts = [f"{_n(graphs)} graph{'' if graphs == 1 else 's'}/step"]
    if x["compiles_in_window"]:
        cause = next((r for r in x["recompiles"] if r["phase"] == "measured"), None)
        why = ""
        if cause is not None:
            why = (
                f" ({cause['kind']}, :{cause['line']})" if cause["line"] else f" ({cause['kind']})"
            )
        parts.append(f"recompiled {x['compiles_in_window']}x{why}")
    if x["fallbacks"]:
        parts.append(_plural(sum(f["count"] for f in x["fallbacks"]), "CPU fallback"))
    forced = [f for f in x["forced"] if f["op"] not in {g["op"] for g in x["fallbacks"]}]
    if forced:
        parts.append(_plural(sum(f["executions"] for f in forced), "forced execution"))
    return " · ".join(parts)


def _labels(x: dict, relpath: str) -> dict[int, list[str]]:
    """1-based line -> the hint's parts."""
    labels: dict[int, list[str]] = {}
    for row in x["lines"]:
        if row["path"] == relpath:
            graphs = ", ".join(str(g) for g in row["graphs"])
            labels.setdefault(row["line"], []).append(
                f"{_plural(row['ir_nodes'], 'IR node')} · graph {graphs}"
                if graphs
                else _plural(row["ir_nodes"], "IR node")
            )
    for f in x["fallbacks"]:
        if f["path"] == relpath:
            labels.setdefault(f["line"], []).append(f"CPU fallback {f['op']}")
    for f in x["forced"]:
        if f["path"] == relpath:
            labels.setdefault(f["line"], []).append(f"forced execution ({f['op']})")
    for r in x["recompiles"]:
        if r["path"] == relpath and r["phase"] == "measured":
            every = " every step" if x["recompiles_every_step"] else ""
            labels.setdefault(r["line"], []).append(f"recompiles{every}: {r['kind']}")
    return labels


def inlay_hints(doc: ProfiledDocument, range_: types.Range) -> list[types.InlayHint]:
    text_lines = doc.text.splitlines()
    found = []
    for placement in doc.placements.values():
        x = info(placement.result)
        if x is None:
            continue
        for line, parts in sorted(_labels(x, doc.relpath).items()):
            now = placement.now(line - 1)
            if (
                now is None
                or now >= len(text_lines)
                or not range_.start.line <= now <= range_.end.line
            ):
                continue
            label = " · ".join(parts) + (" · stale" if doc.is_stale(placement) else "")
            found.append(
                types.InlayHint(
                    position=types.Position(now, utf16_length(text_lines[now])),
                    label="  " + label,
                    padding_left=True,
                    tooltip=f"{placement.result.qualname} on XLA: IR nodes of the step's last "
                    "graph made on this line, the graph(s) of the step its ops ended in, from "
                    f"run {placement.result.run_id}",
                )
            )
    return found


def diagnostics(doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
    """The diagnostics hub's provider: fallbacks, forced executions, recompilations at lines."""
    found: list[types.Diagnostic] = []
    for placement in doc.placements.values():
        result = placement.result
        x = info(result)
        if x is None:
            continue
        tail = f"\n(XLA run of {result.qualname}, {format.age(result.data['created_at'])})"
        messages: list[tuple[int, str, str]] = []
        for f in x["fallbacks"]:
            messages.append((f["line"], f"CPU fallback: {f['op']} has no XLA lowering and runs "
                             f"on the host, {f['count']}x per step (its inputs are copied off "
                             "the device and the graph is cut)", "xla-fallback"))  # fmt: skip
        for f in x["forced"]:
            messages.append((f["line"], f"forced execution: {f['why']} executes the pending "
                             f"graph here ({f['executions']}x per step): the step runs as more "
                             "than one graph", "xla-forced-execution"))  # fmt: skip
        for r in x["recompiles"]:
            if r["phase"] != "measured":
                continue
            every = "every step" if x["recompiles_every_step"] else f"{r['count']}x"
            messages.append((r["line"], f"recompiles {every} in the measured window: "
                             f"{r['detail']} (compile {format.duration(r.get('compile_us') or 0)} "
                             "in all)", "xla-recompile"))  # fmt: skip
        for line, message, code in messages:
            if not line or (
                code == "xla-recompile"
                and not any(r["path"] == doc.relpath for r in x["recompiles"])
            ):
                continue
            now = placement.now(line - 1)
            if now is None:
                continue
            found.append(
                types.Diagnostic(
                    range=_line_range(doc, now),
                    message=message + tail,
                    severity=types.DiagnosticSeverity.Warning,
                    source=SOURCE,
                    code=code,
                )
            )
    return found


def hover_lines(result: Result) -> list[str]:
    """Markdown for the function hover: the section's verdict and per-step figures."""
    x = info(result)
    if x is None:
        return []
    step = x["per_step"]
    return [
        "",
        "",
        f"**XLA** (PJRT {markdown.text(x.get('pjrt_device') or '?')}): "
        + markdown.text(x["message"]),
        "",
        f"per step: {_n(step['graphs'])} graphs · {_n(step['compiles'])} compilations · "
        f"{_n(step['cache_hits'])} cache hits · execute {format.duration(step['execute_us'])} · "
        f"{_n(step['host_reads'])} host reads · {_n(step['fallback_ops'])} CPU fallback ops",
    ]
