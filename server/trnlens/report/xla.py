"""The report's XLA section: where an XLA step's time goes, in lanes, and what cut or recompiled
its graph (a run's ``xla`` field, agent/xla/).

Lanes, per step (medians over the measured window): trace (the host's wall time per step less
the others: tracing the lazy ops, the sync's own work), compile, execute (``ExecuteTime``), and
transfers to and from the device. torch-xla's metrics give totals per step, not when each
happened: the lanes are bars of those totals on one axis, not a timeline. Then the
recompilations with their cause and line, the CPU fallbacks and the forced executions.
"""

from __future__ import annotations

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
    items = []
    for r in x["recompiles"]:
        where = f"{r['path']}:{r['line']}" if r.get("path") else "no project line"
        items.append(f"<li>recompiled {r['count']}x in {E(r['phase'])}: {E(r['detail'])} "
                     f"({E(where)})</li>")  # fmt: skip
    for f in x["fallbacks"]:
        items.append(f"<li>CPU fallback {E(f['op'])} {f['count']}x per step at "
                     f"{E(f['path'] or '?')}:{E(f['line'] or '?')}</li>")  # fmt: skip
    for f in x["forced"]:
        items.append(f"<li>forced execution ({E(f['why'])}) at "
                     f"{E(f['path'] or '?')}:{E(f['line'] or '?')}</li>")  # fmt: skip
    return (
        f'<section class="xla"><h2>{E(prefix)}XLA: {E(x["message"])}</h2>'
        f'<p class="muted">per step, medians over {x["window_steps"]} measured steps; torch-xla '
        "gives totals per step, so these are bars, not a timeline</p>"
        f"{svg}" + (f"<ul>{''.join(items)}</ul>" if items else "") + "</section>"
    )
