"""The ``xla`` part of a result for the terminal: graphs, compilations and their causes,
transfers, CPU fallbacks and forced executions at their lines, IR nodes per line."""

from __future__ import annotations

from collections.abc import Callable

from trnlens import memoryfigures, units
from trnlens.cli.render_attribution import short_path

Table = Callable[[list[str], list[list[str]], set[int]], list[str]]


def _n(value: float | None) -> str:
    value = value or 0
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _at(row: dict) -> str:
    if row.get("path"):
        return f"{row['path']}:{row['line']}"
    # library code: torch-xla's own location (function@file basename:line) says where
    return f"{row['location']} (library)" if row.get("location") else "(no project line)"


def xla_lines(data: dict, table: Table, size: Callable[[float | None], str]) -> list[str]:
    x = data.get("xla")
    if not x:
        return []
    step = x["per_step"]
    out = ["", f"XLA (PJRT {x.get('pjrt_device') or '?'}): {x['message']}"]
    to, back = step["to_device"], step["from_device"]
    out.append(
        f"  per step (median of {x['window_steps']} measured steps): {_n(step['graphs'])} graphs "
        f"executed · {_n(step['compiles'])} compilations · {_n(step['cache_hits'])} cache hits · "
        f"execute {units.duration(step['execute_us'])} · compile "
        f"{units.duration(step['compile_us'])}"
    )
    out.append(
        f"  transfers per step: to device {_n(to['count'])} ({size(to['bytes'])}, "
        f"{units.duration(to['us'])}) · from device {_n(back['count'])} "
        f"({size(back['bytes'])}, {units.duration(back['us'])}) · host reads "
        f"{_n(step['host_reads'])} · CPU fallback ops {_n(step['fallback_ops'])}"
    )
    out.extend(f"  {said}" for said in memoryfigures.xla_memory_words(x))
    first = x["first_call"]
    out.append(
        f"  first call: {_n(first['graphs'])} graphs, {_n(first['compiles'])} compilations "
        f"({units.duration(first['compile_us'])}); warm-up recompilations: "
        f"{_n(x['warmup_compiles'])}; in the measured window: {_n(x['compiles_in_window'])}"
    )
    if x["recompiles"]:
        rows = [
            [r["phase"], _n(r["count"]), r["kind"], _at(r), r["detail"][:70]]
            for r in x["recompiles"]
        ]
        out.append("Recompilations (what changed between the graphs, at the line that made it)")
        out.extend(table(["Phase", "Count", "Cause", "Line", "What changed"], rows, {1}))
        for r in x["recompiles"]:
            if r["phase"] != "measured":
                continue
            if len(r.get("shapes") or []) > 1:
                more = "+" if len(r["shapes"]) >= 8 else ""
                listed = ", ".join(r["shapes"][:4]) + (" ..." if len(r["shapes"]) > 4 else "")
                out.append(f"  {len(r['shapes'])}{more} distinct shapes at {_at(r)}: {listed}")
            if r.get("advice"):
                out.append(f"  what to do: {r['advice']}")
    if x["fallbacks"]:
        rows = [[f["op"], _n(f["count"]), _at(f)] for f in x["fallbacks"]]
        out.append("CPU fallbacks (ops with no XLA lowering, run on the host, per step)")
        out.extend(table(["Op", "Count", "Line"], rows, {1}))
    if x["forced"]:
        rows = [[_at(f), f["op"], _n(f["executions"]), f["why"]] for f in x["forced"]]
        out.append(
            "Forced executions and host reads (an execution cuts the graph mid-step; a read of a "
            "value already on the device is a transfer, per step)"
        )
        out.extend(table(["Line", "Op", "Executions", "Why"], rows, {2}))
    advice = {f["advice"] for f in x["forced"] if f.get("advice")}
    for said in sorted(advice):
        out.append(f"  what to do: {said}")
    for finding in x.get("findings") or []:
        out.append(f"{_at(finding)}: {finding['message']}")
        out.append(f"  what to do: {finding['advice']}")
    if x.get("syncs"):
        rows = [[_at(s), _n(s["count"])] for s in x["syncs"]]
        out.append("Syncs the step makes itself (each one ends a graph)")
        out.extend(table(["Line", "Count"], rows, {1}))
    if x["lines"]:
        rows = [
            [_at(line), _both(line, "ir_nodes"), _both(line, "ops"),
             ", ".join(str(g) for g in line["graphs"])]
            for line in x["lines"]
        ]  # fmt: skip
        out.append(
            "Lines (IR nodes of the step's graphs and ops made there, backward on the line of "
            "the forward op that made it; graph(s) of the step they ended in)"
        )
        out.extend(table(["Line", "IR nodes (bwd)", "Ops (bwd)", "Graph"], rows, {1, 2}))
        if x.get("ir_nodes_elsewhere"):
            out.append(f"  {x['ir_nodes_elsewhere']} IR nodes were made outside the step's ops")
    out.extend(_modules(x, table))
    out.extend(_library_lines(x, table))
    for why in x.get("skipped") or []:
        out.append(f"  not read: {why}")
    return out


def _both(row: dict, key: str) -> str:
    """'12 (5)': a figure and the backward part it includes."""
    back = row.get(f"backward_{key}") or 0
    return _n(row.get(key)) + (f" ({_n(back)})" if back else "")


def _modules(x: dict, table: Table, limit: int = 25) -> list[str]:
    modules = x.get("modules") or []
    if not modules:
        return []
    depth: dict[str, int] = {}
    rows = []
    for m in modules:
        depth[m["name"]] = depth.get(m["parent"], -1) + 1 if m["parent"] else 0
        rows.append([
            "  " * depth[m["name"]] + m["name"], m["type"], _n(m["total_ir_nodes"]),
            _both(m, "ir_nodes"), _both(m, "ops"),
        ])  # fmt: skip
    out = ["Modules (IR nodes with their callees; own IR nodes and ops, backward in brackets)"]
    out.extend(table(["Module", "Type", "IR nodes", "Own (bwd)", "Ops (bwd)"], rows[:limit],
                     {2, 3, 4}))  # fmt: skip
    if len(rows) > limit:
        out.append(f"  ... {len(rows) - limit} more modules (--format json has them all)")
    return out


def _library_lines(x: dict, table: Table, limit: int = 10) -> list[str]:
    found = x.get("library_lines") or []
    if not found:
        return []
    rows = [
        [f"{short_path(r['path'])}:{r['line']}", r["function"], _both(r, "ir_nodes"),
         _both(r, "ops"), ", ".join(f"{c['path']}:{c['line']}" for c in r["callers"][:2])]
        for r in found[:limit]
    ]  # fmt: skip
    out = ["Library lines (the innermost frame outside the project that made the IR nodes)"]
    out.extend(table(["Line", "Function", "IR nodes (bwd)", "Ops (bwd)", "Called from"], rows,
                     {2, 3}))  # fmt: skip
    return out


def comparison_xla_lines(data: dict, table: Table) -> list[str]:
    """Each variant's graphs and IR nodes per step, in a comparison run on XLA."""
    variants = data.get("variants") or []
    if not any(v.get("xla") for v in variants):
        return []
    rows = []
    for v in variants:
        x = v.get("xla")
        label = v["variant"]["label"]
        if not x:
            rows.append([label, "-", "-", "-", "-", "-"])
            continue
        nodes = x.get("ir_nodes_total")
        if nodes is None:  # a run before issue 40: its lines and what was made elsewhere
            nodes = sum(line["ir_nodes"] for line in x["lines"]) + x.get("ir_nodes_elsewhere", 0)
        forced = sum(f["executions"] for f in x["forced"])
        rows.append([
            label, _n(x["per_step"]["graphs"]), _n(x["compiles_in_window"]),
            units.duration(x["per_step"]["execute_us"]), _n(nodes),
            _n(len(x["fallbacks"])), _n(forced),
        ])  # fmt: skip
    headers = ["Variant", "Graphs/step", "Compiles (window)", "Execute/step", "IR nodes",
               "Fallbacks", "Forced"]  # fmt: skip
    out = ["", "XLA (per step: graphs executed, execute time (median), IR nodes of the graphs "
           "read before their syncs, forced executions; compilations in the whole measured "
           "window; a graph the dynamo backend runs from its own cache reads as device data, "
           "0 nodes)"]  # fmt: skip
    out.extend(table(headers, rows, {1, 2, 3, 4, 5, 6}))
    return out
