"""The report's XLA section: where an XLA step's time goes, in lanes, and what cut or recompiled
its graph (a run's ``xla`` field, agent/xla/).

Lanes, per step (medians over the measured window): trace (the host's wall time per step less
the others: tracing the lazy ops, the sync's own work), compile, execute (``ExecuteTime``), and
transfers to and from the device. torch-xla's metrics give totals per step, not when each
happened: the lanes are bars of those totals on one axis, not a timeline. Then the
recompilations with their cause and line, the CPU fallbacks and the forced executions.
"""

from __future__ import annotations

from trnlens import memoryfigures
from trnlens.report import escape
from trnlens.units import duration

E = escape.text
A = escape.attr
WIDTH, LABEL_W, ROW_H = 640, 90, 18


def section(result: dict, prefix: str = "") -> str:
    x = result.get("xla")
    if not isinstance(x, dict):
        return ""
    step = x["per_step"]
    transfer = step["to_device"]["us"] + step["from_device"]["us"]
    wall = float(result.get("wall_time_per_step_us") or 0.0)
    known = step["compile_us"] + step["execute_us"] + transfer
    lanes = [
        ("trace", max(wall - known, 0.0)),
        ("compile", step["compile_us"]),
        ("execute", step["execute_us"]),
        ("transfer", transfer),
    ]
    total = max(sum(v for _, v in lanes), 1e-9)
    rows = []
    for i, (name, value) in enumerate(lanes):
        y = i * (ROW_H + 4)
        width = (WIDTH - LABEL_W - 80) * value / total
        rows.append(
            f'<text x="0" y="{y + 13}">{E(name)}</text>'
            f'<rect class="lane-{A(name)}" x="{LABEL_W}" y="{y}" width="{width:.1f}" '
            f'height="{ROW_H}"><title>{E(name)}: {E(duration(value))} per step</title></rect>'
            f'<text x="{LABEL_W + width + 4:.1f}" y="{y + 13}">{E(duration(value))}</text>'
        )
    height = len(lanes) * (ROW_H + 4)
    svg = (
        f'<svg class="xla-lanes" width="{WIDTH}" height="{height}" role="img" '
        f'aria-label="XLA step lanes">{"".join(rows)}</svg>'
    )
    items = [f"<li>{E(said)}</li>" for said in memoryfigures.xla_memory_words(x)]
    for r in x["recompiles"]:
        where = f"{r['path']}:{r['line']}" if r.get("path") else "no project line"
        items.append(f"<li>recompiled {r['count']}x in {E(r['phase'])}: {E(r['detail'])} "
                     f"({E(where)})</li>")  # fmt: skip
    for f in x["fallbacks"]:
        items.append(f"<li>CPU fallback {E(f['op'])} {f['count']}x per step at "
                     f"{E(f['path'] or '?')}:{E(f['line'] or '?')}</li>")  # fmt: skip
    for f in x["forced"]:
        what = "forced execution" if f["executions"] else "host read (no graph cut)"
        items.append(f"<li>{what} ({E(f['why'])}) at "
                     f"{E(f['path'] or '?')}:{E(f['line'] or '?')}</li>")  # fmt: skip
    for sync in x.get("syncs") or []:
        items.append(f"<li>the step syncs itself {sync['count']}x at "
                     f"{E(sync['path'] or '?')}:{E(sync['line'] or '?')}</li>")  # fmt: skip
    return (
        f'<section class="xla"><h2>{E(prefix)}XLA: {E(x["message"])}</h2>'
        f'<p class="muted">per step, medians over {x["window_steps"]} measured steps; torch-xla '
        "gives totals per step, so these are bars, not a timeline</p>"
        f"{svg}"
        + (f"<ul>{''.join(items)}</ul>" if items else "")
        + _lines_table(x)
        + _modules_table(x)
        + _library_table(x)
        + "</section>"
    )


def _both(row: dict, key: str) -> str:
    """'12 (5 backward)': a figure with the backward part it includes."""
    back = row.get(f"backward_{key}") or 0
    return f"{row.get(key) or 0:g}" + (f" ({back:g} backward)" if back else "")


def _table(title: str, kind: str, headers: list[str], rows: str, note: str = "") -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{E(h)}</th>" for h in headers)
    note = f'<p class="muted">{E(note)}</p>' if note else ""
    return (
        f"<h3>{E(title)}</h3>{note}"
        f'<div class="wide"><table class="{A(kind)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )


def _lines_table(x: dict) -> str:
    rows = "".join(
        f'<tr class="src measured" data-path="{A(r["path"])}" data-line="{A(r["line"])}" '
        f'tabindex="0"><td>{E(r["path"])}:{E(r["line"])}</td>'
        f'<td class="num">{E(_both(r, "ir_nodes"))}</td><td class="num">{E(_both(r, "ops"))}</td>'
        f"<td>{E(', '.join(str(g) for g in r['graphs']))}</td></tr>"
        for r in x.get("lines") or []
    )
    note = (
        "on XLA a line costs IR nodes of the step's graph, not time of its own (the line-timing "
        "pass would change the graph and recompile it); backward counts on the line of the "
        "forward op that made it"
    )
    return _table("Per line: IR nodes and ops", "lines", ["line", "IR nodes", "ops", "graph"],
                  rows, note)  # fmt: skip


def _modules_table(x: dict) -> str:
    modules = x.get("modules") or []
    if not modules:
        return ""
    depth: dict[str, int] = {}
    rows = []
    for m in modules:
        depth[m["name"]] = depth.get(m["parent"], -1) + 1 if m["parent"] else 0
        indent = "\u00a0\u00a0" * depth[m["name"]]
        rows.append(
            f'<tr><td>{E(indent + m["name"])} <span class="muted">{E(m["type"])}</span></td>'
            f'<td class="num">{m["total_ir_nodes"]:g}</td>'
            f'<td class="num">{E(_both(m, "ir_nodes"))}</td>'
            f'<td class="num">{E(_both(m, "ops"))}</td></tr>'
        )
    headers = ["module", "IR nodes (all)", "own IR nodes", "own ops"]
    return _table("Modules: IR nodes, forward and backward", "modules", headers, "".join(rows))


def _library_table(x: dict) -> str:
    rows = "".join(
        f'<tr data-path="{A(r["path"])}" data-line="{A(r["line"])}" tabindex="0">'
        f"<td>{E(r['library'].get('name') or '')}</td>"
        f'<td title="{A(r["path"])}">{E(r["path"].rsplit("/", 1)[-1])}:{E(r["line"])} '
        f"{E(r['function'])}</td>"
        f'<td class="num">{E(_both(r, "ir_nodes"))}</td><td class="num">{E(_both(r, "ops"))}</td>'
        "</tr>"
        for r in (x.get("library_lines") or [])[:15]
    )
    return _table("Library lines: where the IR nodes were made", "library",
                  ["library", "line", "IR nodes", "ops"], rows)  # fmt: skip
