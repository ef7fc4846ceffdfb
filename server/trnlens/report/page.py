"""The report as one self-contained HTML page: markup from a ReportModel, styles and script inline.

Nothing is loaded from anywhere: the style and the script (``assets/``) are inlined under a
per-page nonce that the page's own Content-Security-Policy names (``default-src 'none'``), which
is also what a VS Code webview asks of its content. Links point only at files next to the report
(the chrome trace, NEFF/NTFF), relative, so the page works from any folder and in a browser.
"""

from __future__ import annotations

import secrets
from importlib import resources

from trnlens import speedup, units
from trnlens.agent.notebook.cells import Joined, cell_label
from trnlens.headline import headline as run_headline
from trnlens.report import escape, icicle, ranks, svg, xla
from trnlens.report.views import ReportModel, RunView, relative
from trnlens.results import Result
from trnlens.units import count, duration

E = escape.text
A = escape.attr


def _asset(name: str) -> str:
    return resources.files("trnlens.report").joinpath(f"assets/{name}").read_text("utf-8")


def render(model: ReportModel, generated_at: str) -> str:
    nonce = secrets.token_urlsafe(18)
    timelines = [v.timeline for v in model.runs if v.timeline is not None]
    timeline_svg, details = svg.timelines(timelines) if timelines else ("", [])
    ranks_html, rank_details = ranks.section(
        model.runs[0].result, len(details), _ranks_trace_href(model.runs[0])
    )
    details += rank_details
    body = [
        f"<header><h1>{E(model.title)}</h1>"
        f'<p class="muted">generated {E(generated_at)} by trnlens · one self-contained file, '
        "nothing loaded from the network</p></header>",
        _comparison(model) if model.comparison else _headline(model.runs[0]),
        ranks_html,  # a multi-rank run: every rank on one axis (report/ranks.py)
        _timeline_section(model, timelines, timeline_svg),
    ]
    for view in model.runs:
        prefix = f"{view.label}: " if model.comparison else ""
        body.append(xla.section(view.result, prefix))  # an XLA run's lanes (report/xla.py)
        body.append(_lines_section(view, prefix))
    for view in model.runs:  # the module tree and library lines, where the run has them
        body.append(icicle.section(view.result, f"{view.label}: " if model.comparison else ""))
    for view in model.runs:
        prefix = f"{view.label}: " if model.comparison else ""
        body.append(_ops_section(view, prefix))
    for view in model.runs:
        body.append(_facts_section(view, model.comparison))
    csp = (
        f"default-src 'none'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; img-src data:"
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{A(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{E(model.title)}</title>"
        f'<style nonce="{nonce}">{_asset("report.css")}</style></head>'
        f"<body><main>{''.join(body)}</main>"
        f'<script type="application/json" id="trnlens-data">'
        f"{escape.script_json({'events': details})}</script>"
        f'<script nonce="{nonce}">{_asset("report.js")}</script>'
        "</body></html>\n"
    )


def _ranks_trace_href(view: RunView) -> str | None:
    """The merged chrome trace of a multi-rank run (agent/ranks/trace.py), relative to the page."""
    entry = next((a for a in view.result.get("artifacts") or []
                  if a.get("kind") == "chrome_trace_ranks"), None)  # fmt: skip
    if entry is None or view.run_dir is None or view.report_dir is None:
        return None
    path = view.run_dir / str(entry.get("path"))
    return relative(path, view.report_dir) if path.is_file() else None


def _headline(view: RunView) -> str:
    r = view.result
    if r.get("error"):
        err = r["error"]
        where = f" at {err.get('path')}:{err.get('line')}" if err.get("path") else ""
        return (
            f'<section class="headline error"><p><b>The run failed</b>{E(where)}: '
            f"{E(err.get('message'))}</p></section>"
        )
    timing = r.get("timing") or {}
    cells = [
        ("headline / step", run_headline(r).text),  # the figure the lens and the CLI show
        ("dispatches / step", units.count(r.get("dispatches_per_step"), "dispatch")),
        (f"{Result(r).device_label} / step (profiled)", duration(r.get("device_time_per_step_us"))),
        ("CPU / step (profiled)", duration(r.get("cpu_time_per_step_us"))),
        ("wall / step (profiled)", duration(r.get("wall_time_per_step_us"))),
    ]
    if timing:
        cells.append(
            (
                f"timing pass ({timing.get('repeats')} calls, no profiler)",
                f"{duration(timing.get('median_us'))} median "
                f"({duration(timing.get('min_us'))} – {duration(timing.get('max_us'))})",
            )
        )
    items = "".join(f"<div><span>{E(k)}</span><b>{E(v)}</b></div>" for k, v in cells)
    return f'<section class="headline figures">{items}</section>'


def _comparison(model: ReportModel) -> str:
    rows = []
    base_timing = model.runs[0].result.get("timing") or {}
    for position, view in enumerate(model.runs):
        r = view.result
        timing = r.get("timing") or {}
        comp = r.get("comparison") or _recomputed(base_timing, timing)
        factor = comp.get("speedup")
        span = comp.get("speedup_range") or []
        baseline = comp.get("index", position) == 0
        speed = "baseline" if baseline else speedup.verdict(factor, span, "×")
        speed_cell = E(speed)
        if not baseline and factor and len(span) == 2:
            # the range on its own line: the column stays narrow enough for a side panel
            between = speedup.span_text(span, "×", " – ")
            speed_cell += f'<br><span class="muted range">{E(between)}</span>'
        if speedup.noisy(r):
            speed_cell += '<br><span class="muted">noisy (see its warnings)</span>'
        diff = comp.get("max_abs_diff")
        if comp.get("outputs_not_comparable"):
            diff = speedup.NOT_COMPARABLE
        status = E(r["error"]["message"]) if r.get("error") else ""
        kind = E((r.get("variant") or {}).get("kind"))
        rows.append(
            "<tr>"
            f'<td class="label">{E(view.label)}<br><span class="muted">{kind}</span></td>'
            f'<td class="num speedup">{speed_cell}</td>'
            f'<td class="num">{_headline_cell(r)}</td>'
            f'<td class="num">{E(units.count(r.get("dispatches_per_step"), "dispatch"))}</td>'
            f'<td class="num">{E(duration(r.get("device_time_per_step_us")))}</td>'
            f'<td class="num">{E(duration(timing.get("min_us")))} – '
            f"{E(duration(timing.get('max_us')))}</td>"
            f'<td class="num">{E(_diff(diff))}</td>'
            f"<td>{status}</td></tr>"
        )
    label = Result(model.runs[0].result).device_label
    # What a reader compares first comes first (the variant, its speed-up, its time): in a
    # narrow panel those stay in view and the rest scrolls inside the table's own box.
    return (
        '<section class="comparison"><h2>Variants</h2>'
        f'<p class="muted">{E(_method(model))}; max abs diff is the largest difference of '
        "each output from the baseline's, all variants starting from the same state</p>"
        '<div class="wide"><table class="variants"><thead><tr><th>variant</th>'
        "<th>speed-up</th><th>time / step (headline)</th><th>dispatches</th>"
        f"<th>{E(label)} / step (profiled)</th><th>min – max</th><th>max abs diff</th>"
        f"<th></th></tr></thead><tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _headline_cell(r: dict) -> str:
    """The figure, its basis under it (``unprofiled``): two short lines keep the column narrow
    enough for a side panel, beside the speed-up."""
    shown = run_headline(r)
    if shown.time_us is None:
        return E(shown.text)
    return f'{E(duration(shown.time_us))}<br><span class="muted">{E(shown.label)}</span>'


def _diff(diff) -> str:
    if isinstance(diff, str):
        return diff
    return "–" if diff is None else f"{diff:.3g}"


def _method(model: ReportModel) -> str:
    methods = {(view.result.get("comparison") or {}).get("speedup_method") for view in model.runs}
    if methods == {"rounds"}:
        return speedup.METHOD
    return (
        "speed-ups come from the timing passes without the profiler (median; stored before "
        "interleaved rounds, the range pairs the baseline's extremes with the variant's and "
        "overstates the spread); a range containing 1.00× is no measurable difference"
    )


def _recomputed(base: dict, timing: dict) -> dict:
    """Speed-up and range from the timing passes, for runs stored before variants carried them
    (the agent's formula: baseline median / variant median; max abs diff is not known then)."""
    try:
        return {
            "speedup": base["median_us"] / timing["median_us"],
            "speedup_range": [base["min_us"] / timing["max_us"], base["max_us"] / timing["min_us"]],
        }
    except (KeyError, TypeError, ZeroDivisionError):
        return {}


def _timeline_section(model: ReportModel, timelines, timeline_svg: str) -> str:
    if not timelines:
        items = "".join(f"<li>{E(n)}</li>" for v in model.runs for n in v.notes)
        return f'<section class="timeline-section"><h2>Timeline</h2><ul>{items}</ul></section>'
    figures = []
    for t in timelines:
        share = t.gap_total_us / t.duration_us if t.duration_us else 0.0
        figures.append(
            f'<div class="gapfig"><span>{E(t.label)}: idle between dispatches</span>'
            f"<b>{E(duration(t.gap_total_us))}</b>"
            f'<span class="muted">{E(count(t.gap_count, "gap"))} between '
            f"{E(count(t.dispatches, 'dispatch'))}, "
            f"{_percent(share)} of the step ({E(duration(t.duration_us))})</span></div>"
        )
    notes = sorted(
        {n for t in timelines for n in t.notes} | {n for v in model.runs for n in v.notes}
    )
    note_items = "".join(f"<li>{E(n)}</li>" for n in notes)
    stacked = "stacked on one time axis, " if len(timelines) > 1 else ""
    return (
        '<section class="timeline-section"><h2>Timeline of one measured step</h2>'
        f'<p class="muted">the step of median duration, {stacked}0 = the step\'s start · wheel '
        "or +/− to zoom, drag to pan, click an event for its details</p>"
        f'<div class="gapfigs">{"".join(figures)}</div>'
        '<div class="toolbar"><button type="button" data-zoom="in">+</button>'
        '<button type="button" data-zoom="out">−</button>'
        '<button type="button" data-zoom="reset">reset</button></div>'
        f'<div class="timeline-box">{timeline_svg}</div>'
        '<div id="details" class="details" aria-live="polite">'
        '<p class="muted">click an event for its name, duration, shapes and source line</p></div>'
        f'<ul class="notes">{note_items}</ul></section>'
    )


def _percent(share: float) -> str:
    return f"{share:.1%}" if 0 < share < 0.1 else f"{share:.0%}"


def _lines_section(view: RunView, prefix: str) -> str:
    r = view.result
    lines = {(e.get("path"), e.get("line")): e for e in r.get("lines") or []}
    notebook = (r.get("notebook") or {}).get("cells")
    in_cells = Joined.from_map(notebook) if notebook else None

    def _line_row(path_, number, text, entry, total) -> str:  # a notebook's lines in cells
        placed = in_cells.locate(number) if in_cells and path_ == path and number else None
        shown = f"{cell_label(placed[0].index)}:{placed[1]}" if placed else number
        return _row(path_, number, text, entry, total, shown)

    path = (r.get("function") or {}).get("path")
    total = sum(e.get("device_us") or 0.0 for e in lines.values()) or 0.0
    label = Result(r).device_label if "time_basis" in r else "device"
    head = f"<h2>{E(prefix)}Per line</h2>"
    if r.get("backend") == "xla" and not lines:
        return (
            f'<section class="lines-section">{head}<p class="muted">on XLA the per-line '
            "figures are IR nodes and ops, in the XLA section above: a line has no time of its "
            "own in a compiled graph, and the line-timing pass would change the graph and "
            "recompile it</p></section>"
        )
    if not view.source:
        why = view.source_note or "no source"
        rows = "".join(
            _line_row(path_, n, None, e, total)
            for (path_, n), e in sorted(lines.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
        )
        table = f'<div class="wide"><table class="lines"><tbody>{rows}</tbody></table></div>'
        table = table if rows else ""
        return (
            f'<section class="lines-section">{head}<p class="muted">{E(why)}</p>{table}</section>'
        )
    rows = "".join(_line_row(path, s.number, s.text, lines.get((path, s.number)), total)
                   for s in view.source)  # fmt: skip
    note = f'<p class="warn">{E(view.source_note)}</p>' if view.source_note else ""
    other = [e for (p, _n), e in lines.items() if p != path]
    if other:
        rows += "".join(_line_row(e["path"], e["line"], None, e, total) for e in other)
    return (
        f'<section class="lines-section">{head}{note}'
        f'<p class="muted">{E(path)} · each dispatch counts on the innermost project line that '
        f"called it · bars: share of the function's {E(label)} time</p>"
        '<div class="wide"><table class="lines"><thead><tr><th>line</th><th>share</th>'
        f"<th>{E(label)}</th><th>dispatches</th><th>source</th></tr></thead><tbody>{rows}</tbody>"
        "</table></div></section>"
    )


def _row(path, number, text, entry, total, shown) -> str:
    where = f'data-path="{A(path)}" data-line="{A(number)}"'
    code = f"<td><code>{E(text)}</code></td>" if text is not None else f"<td>{E(path)}</td>"
    # The figures before the source: a long line of code scrolls, the figures stay in view.
    if not entry:
        empty = "<td></td>" * 3
        return f'<tr class="src" {where}><td class="num">{E(shown)}</td>{empty}{code}</tr>'
    share = (entry.get("device_us") or 0.0) / total if total else 0.0
    ops = ", ".join(f"{name} ×{n:g}" for name, n in (entry.get("ops") or {}).items())
    return (
        f'<tr class="src measured" {where} tabindex="0" title="{A(ops)}">'
        f'<td class="num">{E(shown)}</td>'
        f'<td class="share">{svg.share_bar(share)} {share:.0%}</td>'
        f'<td class="num">{E(duration(entry.get("device_us")))}</td>'
        f'<td class="num">{E(units.count(entry.get("dispatches"), "dispatch"))}</td>'
        f"{code}</tr>"
    )


def _ops_section(view: RunView, prefix: str) -> str:
    r = view.result
    ops = r.get("ops") or []
    label = Result(r).device_label if "time_basis" in r else "device"
    if not ops:
        none = '<p class="muted">none</p>'
        return f'<section class="ops-section"><h2>{E(prefix)}Ops</h2>{none}</section>'
    # On the CPU backend the op time *is* CPU time: two columns of the same figures say nothing
    # twice, so the second pair shows only where it differs from the first.
    device = not same_as_cpu(ops)
    rows = []
    for op in ops:
        cells = [
            (op.get("name"), E(op.get("name")), ""),
            (op.get("calls") or 0, E(f"{op.get('calls', 0):g}"), "num"),
            (op.get("self_cpu_us") or 0, E(duration(op.get("self_cpu_us"))), "num"),
            (op.get("cpu_total_us") or 0, E(duration(op.get("cpu_total_us"))), "num"),
        ]
        if device:
            cells += [
                (op.get("self_device_us") or 0, E(duration(op.get("self_device_us"))), "num"),
                (op.get("device_total_us") or 0, E(duration(op.get("device_total_us"))), "num"),
            ]
        cells.append(
            (units.shapes(op.get("input_shapes"), limit=3),
             E(units.shapes(op.get("input_shapes"), limit=3)), "shapes"),
        )  # fmt: skip
        rows.append(
            "<tr>"
            + "".join(f'<td class="{c}" data-v="{A(v)}">{t}</td>' for v, t, c in cells)
            + "</tr>"
        )
    heads = ["op", "calls", "self CPU", "CPU total"]
    heads += [f"self {label}", f"{label} total"] if device else []
    heads.append("input shapes")
    kinds = ["text"] + ["num"] * (len(heads) - 2) + ["text"]
    th = "".join(
        f'<th data-sort="{k}" tabindex="0">{E(h)}</th>' for h, k in zip(heads, kinds, strict=True)
    )
    return (
        f'<section class="ops-section"><h2>{E(prefix)}Ops (per step)</h2>'
        '<p class="muted">click a column to sort</p>'
        f'<div class="wide"><table class="ops sortable"><thead><tr>{th}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def same_as_cpu(ops: list[dict]) -> bool:
    """Every op's device (op) time equals its CPU time, to the shown precision."""
    pairs = (("self_cpu_us", "self_device_us"), ("cpu_total_us", "device_total_us"))
    return all(duration(op.get(cpu)) == duration(op.get(dev)) for op in ops for cpu, dev in pairs)


def _facts_section(view: RunView, comparison: bool) -> str:
    r = view.result
    fn = r.get("function") or {}
    versions = r.get("versions") or {}
    inputs = r.get("inputs") or {}
    shapes = ", ".join(
        f"{a.get('dtype', '')}{a.get('shape')}"
        for a in inputs.get("args") or []
        if isinstance(a, dict)
    )
    facts = [
        ("function", f"{fn.get('path')}::{fn.get('qualname')}"),
        ("run", r.get("run_id")),
        ("created", r.get("created_at")),
        ("target", f"{r.get('target')} ({r.get('host')})"),
        ("backend", r.get("backend")),
        ("device", r.get("device")),
        ("time basis", _basis(r.get("time_basis"), r.get("backend"))),
        ("mode", r.get("mode")),
        ("steps", f"{r.get('warmup')} warm-up, {r.get('steps')} profiled"),
        ("inputs", f"{inputs.get('source', '')}: {shapes}" if inputs else "–"),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions.items() if v)),
        ("git commit", r.get("git_commit") or "–"),
    ]
    rows = "".join(f"<tr><th>{E(k)}</th><td>{E(v)}</td></tr>" for k, v in facts)
    warnings = "".join(f"<li>{E(w)}</li>" for w in r.get("warnings") or [])
    links = []
    for link in view.links:
        href = escape.relative_href(link.href)
        if href:
            links.append(
                f'<li><a class="file" href="{href}">{E(link.label)}</a> '
                f'<span class="muted">{E(link.detail)}</span></li>'
            )
    links.extend(_neuron_items(view))
    title = f"{view.label}: run facts" if comparison else "Run facts"
    return (
        f'<section class="facts"><h2>{E(title)}</h2><table class="facts">{rows}</table>'
        + (f'<h3>Warnings</h3><ul class="warnings">{warnings}</ul>' if warnings else "")
        + (f"<h3>Files</h3><ul>{''.join(links)}</ul>" if links else "")
        + "</section>"
    )


def _basis(basis, backend=None) -> str:
    if backend == "xla":
        return (
            "host (xla: the host traces the lazy ops, then each step's sync compiles and "
            "executes the graph; the XLA section has the execute time)"
        )
    if basis == "cpu":
        return "CPU (the cpu backend runs ops on the host; no accelerator time is claimed)"
    return f"{basis} (the accelerator's own time)" if basis else "–"


def _neuron_items(view: RunView) -> list[str]:
    from trnlens.explorer.artifacts import size
    from trnlens.report.views import relative

    profile, report_dir = view.neuron, view.report_dir
    if profile is None or report_dir is None:
        return []

    def link(file) -> str:
        href = escape.relative_href(relative(file.path, report_dir))
        name = E(file.path.name)
        shown = f'<a class="file" href="{href}">{name}</a>' if href else name
        return f"{shown} ({E(size(file.size))}{', empty' if file.empty else ''})"

    items = []
    for pair in profile.pairs:
        ntffs = ", ".join(link(n) for n in pair.ntffs) or "no NTFF"
        items.append(f"<li>NEFF {link(pair.neff)} ↔ NTFF {ntffs}</li>")
    for neff in profile.orphan_neffs:
        items.append(f"<li>NEFF {link(neff)}: no NTFF (orphan)</li>")
    for ntff in profile.orphan_ntffs:
        items.append(f"<li>NTFF {link(ntff)}: no NEFF with its hash (orphan)</li>")
    for runtime in profile.runtime:
        items.append(f"<li>runtime trace {link(runtime)}</li>")
    if items:
        items.append('<li class="muted">trnlens explorer RUN opens these in Neuron Explorer</li>')
    return items
