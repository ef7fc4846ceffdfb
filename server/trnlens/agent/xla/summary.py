"""The result's ``xla`` section: what the recorder counted per call and what the sites step
found, as per-step figures, recompilations with their cause and line, and one verdict.

Per-step figures are medians over the measured window (every call after warm-up: the profiled
steps, the lines pass and the timing pass, all synchronised alike); compilations are totals
there. A compilation in the first call is the step's first; any later one is a recompilation,
in warm-up or (the classic slowdown) in the window, and is said loudly.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from .. import attribution, errors
from . import irtext, memory, tables
from .origin import VIEW_OPS, view_origin
from .recorder import Call
from .sites import Sites
from .sites import attribute as sites_step


def xla_section(recorder, step, project, context, named_modules=(), roots=()) -> dict[str, Any]:
    """The section for a run whose calls ``recorder`` counted: the sites step first (one more
    call of ``step`` under the dispatch mode, sites.py), then the figures. A sites step that
    fails is this tool's limit, not the user's code (the same step ran in every measured pass):
    the graphs, compilations and times stand, and the section says what it skipped."""
    kinds = attribution.FrameKinds(project.is_project_file, project.relpath, recorder.torch)
    recorder.finish()
    try:
        found: Sites | None = sites_step(step, recorder, project, context, named_modules, roots)
    except errors.AgentError:
        raise
    except Exception as exc:  # noqa: BLE001 - said in the section, never a failed run
        found = None
        skipped = (
            f"lines, modules, fallbacks and forced executions were not read: the step under "
            f"trnlens's dispatch mode raised {type(exc).__name__}: {str(exc)[:200]}"
        )
    sources = irtext.Sources(project.is_project_file, project.relpath)

    def read(relpath: str) -> str | None:
        try:
            return project.read(os.path.join(project.root, relpath))
        except (OSError, UnicodeDecodeError):
            return None

    out = section(recorder, found, sources, recorder.backend, kinds, read)
    try:  # what the step holds on the device, and the allocator's figures (memory.py)
        backend = recorder.backend
        out["memory"] = memory.section(recorder.torch, backend.xm, backend.device, list(roots))
    except Exception as exc:  # noqa: BLE001 - said in the section, never a failed run
        out["skipped"].append(f"device memory was not read: {type(exc).__name__}: {exc}"[:240])
    if found is None:
        out["skipped"].append(skipped)
        out["message"] = verdict(out)
    return out


def section(recorder, sites: Sites | None, sources: irtext.Sources, backend,
            kinds=None, read=None) -> dict[str, Any]:  # fmt: skip
    calls: list[Call] = recorder.calls
    window = [c for c in calls if c.phase == "measured"]
    warm = [c for c in calls if c.phase != "measured"]

    def median(values: list[float]) -> float:
        return statistics.median(values) if values else 0.0

    per_step = {
        "graphs": median([c.delta.executions for c in window]),
        "compiles": median([c.delta.compiles for c in window]),
        "cache_hits": median([c.delta.cached for c in window]),
        "compile_us": median([c.delta.compile_ns / 1e3 for c in window]),
        "execute_us": median([c.delta.execute_ns / 1e3 for c in window]),
        "to_device": _transfer(window, "to_device"),
        "from_device": _transfer(window, "from_device"),
        "host_reads": median([c.delta.host_reads for c in window]),
        "fallback_ops": median([sum(c.delta.fallbacks.values()) for c in window]),
    }
    recompiles = _recompiles(calls, sources, read or (lambda relpath: None))
    in_window = sum(c.delta.compiles for c in window)
    every = bool(window) and all(c.delta.compiles for c in window)
    out: dict[str, Any] = {
        "pjrt_device": backend.versions().get("pjrt_device"),
        "ir_debug": backend.ir_debug,
        "window_steps": len(window),
        "per_step": per_step,
        "compiles_in_window": in_window,
        "recompiles_every_step": every,
        "first_call": {
            "graphs": calls[0].delta.executions if calls else 0,
            "compiles": calls[0].delta.compiles if calls else 0,
            "compile_us": calls[0].delta.compile_ns / 1e3 if calls else 0.0,
            # graphs found in the process's in-memory cache: an earlier run in the same (warm)
            # agent compiled them
            "cache_hits": calls[0].delta.cached if calls else 0,
        },
        "persistent_cache": _persistent(calls),
        "warmup_compiles": sum(c.delta.compiles for c in warm[1:]),
        "recompiles": recompiles,
        "fallbacks": sites.fallbacks if sites else [],
        "forced": sites.forced if sites else [],
        "lines": tables.lines(sites, kinds) if sites else [],
        "ir_nodes_elsewhere": sites.ir_nodes_elsewhere if sites else 0,
        "collection_us": recorder.overhead_s * 1e6,
        "skipped": list(sites.skipped) if sites else [],
    }
    if sites is not None:
        out["library_lines"], out["library_lines_rest"] = tables.library_lines(sites, kinds)
        out["modules"], out["modules_rest"] = tables.modules(sites, kinds)
        out["library_files"] = tables.library_files(sites, kinds)
        out["step_graphs"] = sites.graphs
        # every IR node of the step's graphs (read ones): on its place, or made outside an op
        out["ir_nodes_total"] = sum(t.ir_nodes for t in sites.tallies) + sites.ir_nodes_elsewhere
        out["syncs"] = sites.syncs
        out["backward_passes"] = len(sites.backward_passes)
        out["findings"] = _findings(sites)
        if not sites.ir_read:
            out["skipped"].append("IR nodes: the step left no XLA tensor pending for its sync")
    out["message"] = verdict(out)
    return out


def _persistent(calls: list[Call]) -> dict | None:
    """The persistent compilation cache's counts over the run, when it was used."""
    hits = sum(c.delta.persistent_hits for c in calls)
    misses = sum(c.delta.persistent_misses for c in calls)
    failures = sum(c.delta.persistent_failures for c in calls)
    if not (hits or misses or failures):
        return None
    return {"hits": hits, "misses": misses, "load_failures": failures}


def _transfer(window: list[Call], kind: str) -> dict:
    def median(values):
        return statistics.median(values) if values else 0.0

    return {
        "count": median([getattr(c.delta, kind) for c in window]),
        "bytes": median([getattr(c.delta, f"{kind}_bytes") for c in window]),
        "us": median([getattr(c.delta, f"{kind}_ns") / 1e3 for c in window]),
    }


def _recompiles(calls: list[Call], sources: irtext.Sources, read) -> list[dict]:
    """Every call after the first that compiled, grouped by phase and cause, with the shapes
    it saw and what to do about it. A view's changed shape is put on the line that made the
    view (origin.py), ``read(relpath)`` giving the source."""
    groups: dict[tuple, dict] = {}
    for k, call in enumerate(calls):
        if k == 0 or not call.delta.compiles:
            continue
        before = next((c.ir for c in reversed(calls[:k]) if c.ir is not None), None)
        after = call.ir if call.ir is not None else (
            calls[k + 1].ir if k + 1 < len(calls) else None
        )  # fmt: skip
        if before is not None and after is not None:
            found = irtext.cause(before, after, sources)
        else:
            found = {"kind": "unknown", "detail": "the graphs' IR was not read", "path": None,
                     "line": None, "location": None}  # fmt: skip
        shape = found.pop("shape", None)
        if found.pop("op", None) in VIEW_OPS and found["path"] and found["line"]:
            text = read(found["path"])
            made = view_origin(text, found["line"]) if text else None
            if made is not None:
                found["used_at"] = found["line"]
                found["line"] = made[0]
                found["detail"] += f" (the view made at line {made[0]}: `{made[1][:60]}`)"
        phase = "measured" if call.phase == "measured" else "warmup"
        key = (phase, found["kind"], found["path"], found["line"], found["location"])
        group = groups.get(key)
        if group is None:
            group = groups[key] = {"phase": phase, **found, "count": 0, "calls": [], "shapes": []}
            group["advice"] = _advice(found["kind"], phase)
        if shape and shape not in group["shapes"] and len(group["shapes"]) < 8:
            group["shapes"].append(shape)
        group["count"] += call.delta.compiles
        group["calls"].append(call.index)
        group["compile_us"] = group.get("compile_us", 0.0) + call.delta.compile_ns / 1e3
    return list(groups.values())


def _findings(sites: Sites) -> list[dict]:
    """The trainer's XLA costs the sites step saw that no other part of the section names."""
    found = []
    passes = sites.backward_passes
    if len(passes) >= 2 and not sites.syncs and sites.graphs == 1:
        where = next((p for p in passes if p["path"]), passes[0])
        found.append({
            "kind": "accumulation-in-one-graph", **where,
            "message": f"{len(passes)} backward passes (micro-batches) in one graph: the graph "
            "grows with every micro-batch (a longer compilation, more device memory, a new "
            "graph for each accumulation count)",
            "advice": "call xm.mark_step() (torch_xla.sync()) after each micro-batch's "
            "backward: one graph per micro-batch, compiled once and run N times",
        })  # fmt: skip
    return found


def _advice(kind: str, phase: str) -> str:
    """What to do about a recompilation of this kind, on XLA (each compilation is minutes on
    Neuron)."""
    if kind in ("shape", "input"):
        return (
            "each new length compiles a new graph: pad the varying length to a few bucket sizes "
            "(the next multiple of 64, or the model's max length) so every bucket compiles once"
        )
    if kind == "constant":
        return (
            "a Python number baked into the graph changes: keep it on the device as a tensor "
            "(torch.tensor(value, device=...)) so the graph stays the same"
        )
    if kind == "graph" and phase == "warmup":
        return (
            "the graph changed after the first step (an optimizer's state appears at its first "
            "step): a one-off, paid again on every cold start; torch-xla's persistent "
            "compilation cache keeps both graphs across runs"
        )
    return (
        "the step's graph differs from call to call: a branch on a Python value, or a loop "
        "whose count changes"
    )


def verdict(x: dict) -> str:
    """One sentence on the step's graphs, said loudly when it recompiles."""
    parts = [f"{_fmt(x['per_step']['graphs'])} graph(s)/step"]
    if x["recompiles_every_step"]:
        where = next((r for r in x["recompiles"] if r["phase"] == "measured"), None)
        at = f" ({where['detail']}, {where['path']}:{where['line']})" if where and where[
            "path"] else ""  # fmt: skip
        parts.append(f"RECOMPILES EVERY STEP{at}: {x['compiles_in_window']} compilations in "
                     f"{x['window_steps']} measured steps")  # fmt: skip
    elif x["compiles_in_window"]:
        parts.append(f"{x['compiles_in_window']} compilation(s) in the measured window")
    else:
        parts.append("no compilation in the measured window")
    first = x.get("first_call") or {}
    if first.get("graphs") and not first.get("compiles"):
        # a warm repeat: what the user waits for on Neuron (minutes a graph) did not happen
        parts.append("the first call compiled nothing (its graphs were already compiled in "
                     "this agent)")  # fmt: skip
    if x["fallbacks"]:
        ops = sorted({f["op"] for f in x["fallbacks"]})
        parts.append(f"CPU fallback: {', '.join(ops)}")
    forced = [f for f in x["forced"] if f["path"] and f["executions"]]
    if forced:
        parts.append(
            "forced executions at " + ", ".join(f"{f['path']}:{f['line']}" for f in forced[:3])
        )
    reads = [f for f in x["forced"] if f["path"] and not f["executions"]]
    if reads:  # the value was on the device already: a transfer each step, no graph cut
        parts.append("host reads at " + ", ".join(f"{f['path']}:{f['line']}" for f in reads[:3]))
    syncs = [s for s in x.get("syncs") or [] if s["path"]]
    if syncs:
        parts.append("the step syncs itself at " + ", ".join(
            f"{s['path']}:{s['line']}" + (f" ({s['count']}x)" if s["count"] > 1 else "")
            for s in syncs[:3]))  # fmt: skip
    for finding in x.get("findings") or []:
        parts.append(f"{finding['message'].split(':')[0]} at {finding['path']}:{finding['line']}")
    if x.get("skipped"):
        parts.append("not read: " + "; ".join(x["skipped"]))
    return " · ".join(parts)


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"
