"""The sites step's places (sites.py) as the section's tables: project lines, library lines and
the module tree, each with its ops and IR nodes, forward and backward.

Backward counts where its forward ran (a backward op on the place of the forward op that made
its node), so every figure here includes its backward part, given beside it (the forward is the
difference), as the CPU backend's tables do (breakdown.py). A module's own figures are the ops
that ran while it was the innermost module; its totals add every module it called.
"""

from __future__ import annotations

from collections import defaultdict

from ..attribution import library_of
from .sites import Sites

LIMIT = 50  # library lines and modules kept (their ancestors too): a 32-layer model stays small
CALLERS_KEPT = 5


def _counts() -> dict:
    return {"ops": 0, "backward_ops": 0, "ir_nodes": 0, "backward_ir_nodes": 0}


def _add(row: dict, ops: int, ir_nodes: int, backward: bool) -> None:
    row["ops"] += ops
    row["ir_nodes"] += ir_nodes
    if backward:
        row["backward_ops"] += ops
        row["backward_ir_nodes"] += ir_nodes


def lines(found: Sites, kinds) -> list[dict]:
    """Per project line: ops and IR nodes (backward included), the graphs of the step its ops
    ended in; in file and line order."""
    rows: dict[tuple, dict] = {}
    for place, tally in zip(found.places, found.tallies, strict=True):
        proj = place[1]
        if proj is None:
            continue
        key = (kinds.display(proj[0]), proj[1])
        row = rows.setdefault(key, {"path": key[0], "line": key[1], **_counts(), "graphs": set()})
        _add(row, tally.ops, tally.ir_nodes, place[3])
        row["graphs"] |= tally.graphs
    out = []
    for key in sorted(rows):
        row = rows[key]
        row["graphs"] = sorted(row["graphs"])
        out.append(row)
    return out


def library_lines(found: Sites, kinds, limit: int = LIMIT) -> tuple[list[dict], dict]:
    """Per innermost frame outside the project (torch's, transformers'...): its ops and IR
    nodes and the project lines that led there; the most IR nodes first, the rest summed."""
    rows: dict[tuple, dict] = {}
    callers: dict[tuple, dict] = defaultdict(lambda: defaultdict(int))
    for place, tally in zip(found.places, found.tallies, strict=True):
        innermost, proj = place[0], place[1]
        if innermost is None or kinds.kind(innermost[0]) == "project":
            continue
        key = (innermost[0], innermost[1])
        row = rows.get(key)
        if row is None:
            row = rows[key] = {
                "path": kinds.display(innermost[0]), "line": innermost[1],
                "function": innermost[2], "library": library_of(innermost[0]), **_counts(),
            }  # fmt: skip
        _add(row, tally.ops, tally.ir_nodes, place[3])
        if proj is not None:
            callers[key][(kinds.display(proj[0]), proj[1])] += tally.ops
    table = []
    for key, row in rows.items():
        row["callers"] = [
            {"path": path, "line": line, "ops": n}
            for (path, line), n in sorted(callers[key].items(), key=lambda kv: -kv[1])
        ][:CALLERS_KEPT]
        table.append(row)
    table.sort(key=lambda r: (-r["ir_nodes"], -r["ops"], r["path"], r["line"]))
    kept, rest = table[:limit], table[limit:]
    return kept, {"count": len(rest), "ops": sum(r["ops"] for r in rest),
                  "ir_nodes": sum(r["ir_nodes"] for r in rest)}  # fmt: skip


def modules(found: Sites, kinds, limit: int = LIMIT) -> tuple[list[dict], dict]:
    """The module tree in first-call order: each module's own ops and IR nodes and its totals
    (its callees' added), forward and backward; the modules with the most IR nodes in all are
    kept, with every ancestor (a whole tree), the rest summed."""
    info = found.modules
    own: dict[int, dict] = defaultdict(_counts)
    for place, tally in zip(found.places, found.tallies, strict=True):
        if place[2] is not None:
            _add(own[place[2]], tally.ops, tally.ir_nodes, place[3])
    total: dict[int, dict] = {key: dict(own.get(key) or _counts()) for key in info}
    for key in info:
        parent, seen = info[key].parent, set()
        while parent is not None and parent not in seen:
            seen.add(parent)
            for name, value in (own.get(key) or _counts()).items():
                total[parent][name] += value
            parent = info[parent].parent
    ranked = sorted(info, key=lambda k: (-total[k]["ir_nodes"], -total[k]["ops"], k))
    kept = set(ranked[:limit])
    for key in list(kept):
        parent = info[key].parent
        while parent is not None and parent not in kept:
            kept.add(parent)
            parent = info[parent].parent
    rows = []
    for key in sorted(kept):
        module = info[key]
        mine = own.get(key) or _counts()
        source = None
        if module.source is not None:
            source = {"path": kinds.display(module.source[0]), "line": module.source[1]}
        rows.append({
            "name": module.name, "type": module.type, "type_path": module.type_path,
            "source": source,
            "parent": info[module.parent].name if module.parent is not None else None,
            **mine,
            **{f"total_{name}": value for name, value in total[key].items()},
            "caller": _site(module.caller, kinds),
        })  # fmt: skip
    rest = [k for k in info if k not in kept]
    return rows, {"count": len(rest), "ops": sum((own.get(k) or _counts())["ops"] for k in rest),
                  "ir_nodes": sum((own.get(k) or _counts())["ir_nodes"] for k in rest)}  # fmt: skip


def library_files(found: Sites, kinds) -> list[dict]:
    """Every file outside the project that made an op or defines a called module's forward:
    what the static rules read after the run (the library findings)."""
    files = {place[0][0] for place in found.places if place[0] is not None}
    files.update(m.source[0] for m in found.modules.values() if m.source is not None)
    return [
        {"path": kinds.display(f), "library": library_of(f)}
        for f in sorted(files)
        if kinds.kind(f) not in ("project", "agent") and not f.startswith("<")
    ]


def _site(raw, kinds) -> dict | None:
    if raw is None:
        return None
    return {"path": kinds.display(raw[0]), "line": raw[1]}
