"""The ``torch.compile`` part of a result for the terminal: graphs, breaks, recompiles, time."""

from __future__ import annotations

from trnlens import units


def compile_lines(data: dict) -> list[str]:
    """Lines for the result's ``compile`` field (nothing when the run was not compiled)."""
    info = data.get("compile")
    if not info:
        return []
    graphs = info.get("graphs") or []
    per_call = info.get("graphs_per_call") or 0
    breaks = info.get("breaks") or []
    title = "torch.compile"
    if info.get("scope") == "callee":  # the function is eager; code it called compiled
        title += " (compiled code it called: a compiled function or module)"
    out = ["", title]
    summary = [f"{_plural(per_call, 'graph')} per call", _plural(len(breaks), "graph break")]
    recompiles = info.get("recompiles") or []
    measured = [r for r in recompiles if r.get("phase") == "measured"]
    summary.append(
        _plural(len(recompiles), "recompile")
        + (f" ({len(measured)} in the measured window)" if measured else "")
    )
    times = info.get("compile_time_us")
    if times and times.get("total_us") is not None:
        split = []
        if times.get("tracing_us") is not None:
            split.append(f"tracing {units.duration(times['tracing_us'])}")
        if times.get("backend_us") is not None:
            split.append(f"backend {units.duration(times['backend_us'])}")
        text = f"compile {units.duration(times['total_us'])}"
        summary.append(text + (f" ({', '.join(split)})" if split else ""))
    if data.get("first_call_us") is not None and data.get("timing"):
        summary.append(
            f"first call {units.duration(data['first_call_us'])} vs "
            f"{units.duration(data['timing']['median_us'])} warm"
        )
    out.append("  " + "  ·  ".join(summary))
    if info.get("reused_from"):
        out.append(f"  (compiled in {info['reused_from']})")
    for i, graph in enumerate(graphs, 1):
        where = f"{graph.get('path')}:{graph.get('line')}" if graph.get("path") else "?"
        names = graph.get("op_names")
        ops = _plural(graph["ops"], "op") + (f": {', '.join(names)}" if names else "")
        phase = "" if graph.get("phase") == "first_call" else f" [{graph.get('phase')}]"
        out.append(f"  graph {i} ({graph.get('function')}, {where}){phase}: {ops}")
    for b in breaks:
        out.append(f"  graph break at {b['path']}:{b['line']}: {b['reason']}")
    for r in recompiles:
        where = f"{r.get('path')}:{r.get('line')}" if r.get("path") else "?"
        out.append(f"  recompiled {r.get('function')} ({where}) in {r['phase']}: {r['guard']}")
    out.extend(f"  note: {w}" for w in info.get("warnings") or [])
    return out


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def comparison_lines(data: dict) -> list[str]:
    """One line per compiled variant of a comparison: its graphs, breaks and recompiles."""
    out = []
    for variant in data.get("variants") or []:
        info = variant.get("compile")
        if not info or variant.get("error"):
            continue
        label = (variant.get("variant") or {}).get("label") or variant["function"]["qualname"]
        parts = [_plural(info.get("graphs_per_call") or 0, "graph") + " per call"]
        times = info.get("compile_time_us") or {}
        if times.get("total_us") is not None:
            parts.append(f"compile {units.duration(times['total_us'])}")
        out.append(f"{label}: " + "  ·  ".join(parts))
        for b in info.get("breaks") or []:
            out.append(f"  graph break at {b['path']}:{b['line']}: {b['reason']}")
        for r in info.get("recompiles") or []:
            out.append(f"  recompiled in {r['phase']}: {r['guard']}")
    return out
