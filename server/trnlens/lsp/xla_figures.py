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

from trnlens import memoryfigures
from trnlens.lsp import format, markdown
from trnlens.lsp.diagnostics import SOURCE, _line_range
from trnlens.lsp.documents import ProfiledDocument
from trnlens.lsp.hints import GAP, STALE, Labelled, fitted, utf16_length
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
    forced = _forced(x)
    if forced:
        parts.append(_plural(sum(f["executions"] for f in forced), "forced execution"))
    reads = [f for f in x["forced"] if not f["executions"]]
    if reads:
        parts.append(_plural(len(reads), "host read"))
    return " · ".join(parts)


def _forced(x: dict) -> list[dict]:
    """Forced executions that are not a CPU fallback's (a fallback's own hint and diagnostic
    say it cuts the graph): what the lens counts and the hints show, the same entries."""
    fallbacks = {(g["op"], g["path"], g["line"]) for g in x["fallbacks"]}
    return [
        f for f in x["forced"]
        if f["executions"] and (f["op"], f["path"], f["line"]) not in fallbacks
    ]  # fmt: skip


def _labels(x: dict, relpath: str) -> dict[int, list[tuple[str, str | None]]]:
    """1-based line -> the hint's parts, each with its short form: None for the IR nodes' part
    (a figure, the first left out when the line is short of room), a problem's first words."""
    labels: dict[int, list[tuple[str, str | None]]] = {}
    for row in x["lines"]:
        if row["path"] == relpath:
            nodes = _plural(row["ir_nodes"], "IR node")
            if row.get("backward_ir_nodes"):  # the backward its forward ops made, inside
                nodes += f" ({_n(row['backward_ir_nodes'])} bwd)"
            graphs = ", ".join(str(g) for g in row["graphs"])
            labels.setdefault(row["line"], []).append(
                (f"{nodes} · graph {graphs}" if len(row["graphs"]) == 1 else nodes, None)
            )
    for f in x["fallbacks"]:
        if f["path"] == relpath:
            labels.setdefault(f["line"], []).append((f"CPU fallback {f['op']}", "CPU fallback"))
    for f in _forced(x):
        if f["path"] == relpath:
            labels.setdefault(f["line"], []).append(("forced execution", "forced execution"))
    for f in x["forced"]:
        if f["path"] == relpath and not f["executions"]:
            labels.setdefault(f["line"], []).append(("host read", "host read"))
    for finding in x.get("findings") or []:
        if finding["path"] == relpath and finding["kind"] == "accumulation-in-one-graph":
            labels.setdefault(finding["line"], []).append(
                ("micro-batches in one graph", "micro-batches in one graph")
            )
    for sync in x.get("syncs") or []:
        if sync["path"] == relpath:
            text = f"sync ({_n(sync['count'])}x)"
            labels.setdefault(sync["line"], []).append((text, text))
    for r in x["recompiles"]:
        if r["path"] == relpath and r["phase"] == "measured":
            every = " every step" if x["recompiles_every_step"] else ""
            labels.setdefault(r["line"], []).append(
                (f"recompiles{every}: {r['kind']}", "recompiles")
            )
    return labels


def _fits(parts: list[tuple[str, str | None]], stale: str) -> list[str]:
    """A line's labels, richest first: every part; the IR nodes without their graph; the
    problems alone (what to act on); then in their short forms."""
    problems = [(full, short) for full, short in parts if short is not None]
    figures = [full for full, short in parts if short is None]
    levels = [[full for full, _ in parts]]
    if figures:
        levels.append([f.split(" · graph")[0] for f in figures] + [p for p, _ in problems])
    if problems:
        levels += [[p for p, _ in problems], [s for _, s in problems if s is not None]]
    return [" · ".join(level) + stale for level in levels]


def inlay_hints(doc: ProfiledDocument, range_: types.Range) -> list[types.InlayHint]:
    return fitted(labelled(doc, range_))


def labelled(doc: ProfiledDocument, range_: types.Range) -> list[Labelled]:
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
            labels = [
                GAP + label for label in _fits(parts, STALE if doc.is_stale(placement) else "")
            ]
            hint = types.InlayHint(
                position=types.Position(now, utf16_length(text_lines[now])),
                label=labels[0],
                padding_left=True,
                tooltip=_tooltip(x, doc.relpath, line, placement.result),
            )
            found.append(Labelled(hint, labels, priority=1))  # its problems before the times
    return found


def _tooltip(x: dict, relpath: str, line: int, result: Result) -> str:
    """The hint's whole story: its figures in words, what each part means."""
    said = [f"{result.qualname} on XLA, run {result.run_id}:"]
    row = next((r for r in x["lines"] if (r["path"], r["line"]) == (relpath, line)), None)
    if row is not None:
        said.append(
            f"{_plural(row['ir_nodes'], 'IR node')} of the step's graphs made here "
            f"({_n(row.get('backward_ir_nodes') or 0)} by the backward of this line's forward "
            f"ops), {_plural(row['ops'], 'op')} ({_n(row.get('backward_ops') or 0)} backward); "
            f"graph(s) of the step its ops ended in: {', '.join(map(str, row['graphs']))}"
        )
    for f in x["forced"]:
        if (f["path"], f["line"]) == (relpath, line):
            said.append(
                f"{f['op']}: {f['why']}; "
                + (f"executes the pending graph {_n(f['executions'])}x a step" if f["executions"]
                   else "the value was on the device already: a transfer, no graph cut")
            )  # fmt: skip
    return "\n".join(said)


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
        for f in _forced(x):
            advice = f"; {f['advice']}" if f.get("advice") else ""
            messages.append((f["line"], f"forced execution: {f['why']} executes the pending "
                             f"graph here ({f['executions']}x per step): the step runs as more "
                             f"than one graph{advice}", "xla-forced-execution"))  # fmt: skip
        for finding in x.get("findings") or []:
            if finding["path"] == doc.relpath:
                messages.append((finding["line"], f"{finding['message']}; {finding['advice']}",
                                 f"xla-{finding['kind']}"))  # fmt: skip
        for r in x["recompiles"]:
            if r["phase"] != "measured":
                continue
            every = "every step" if x["recompiles_every_step"] else f"{r['count']}x"
            advice = f"; {r['advice']}" if r.get("advice") else ""
            messages.append((r["line"], f"recompiles {every} in the measured window: "
                             f"{r['detail']} (compile {format.duration(r.get('compile_us') or 0)} "
                             f"in all){advice}", "xla-recompile"))  # fmt: skip
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
    out = [
        "",
        "",
        f"**XLA** (PJRT {markdown.text(x.get('pjrt_device') or '?')}): "
        + markdown.text(x["message"]),
        "",
        # Compilations as a total over the window, as the verdict says them (a median of 0
        # beside "6 compilations in the measured window" read as a contradiction).
        f"per step (medians of {x['window_steps']} measured steps): {_n(step['graphs'])} graphs"
        f" · {_n(step['cache_hits'])} cache hits · execute {format.duration(step['execute_us'])}"
        f" · {_n(step['host_reads'])} host reads · {_n(step['fallback_ops'])} CPU fallback ops; "
        f"{_plural(x['compiles_in_window'], 'compilation')} in the whole measured window",
    ]
    memory = memoryfigures.xla_memory_words(x)
    if memory:
        out += ["", "memory: " + "; ".join(markdown.text(said) for said in memory)]
    modules = sorted((m for m in x.get("modules") or [] if m["ir_nodes"]),
                     key=lambda m: -m["ir_nodes"])[:3]  # fmt: skip
    if modules:
        out += ["", "IR nodes by module (own, backward included): " + ", ".join(
            f"`{m['name']}` {_n(m['ir_nodes'])}" for m in modules)]  # fmt: skip
    library = (x.get("library_lines") or [])[:3]
    if library:
        out += ["", "by library line: " + ", ".join(
            f"{markdown.text(r['path'].rsplit('/', 1)[-1])}:{r['line']} {_n(r['ir_nodes'])}"
            for r in library)]  # fmt: skip
    return out
