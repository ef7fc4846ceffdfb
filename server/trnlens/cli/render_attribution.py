"""The attribution part of a profile's text output: the Modules table and the Library lines.

Both read the result's ``modules`` and ``frames`` (schema 3, the attribution pass). Shares are of
the step's attributed time (the sum over every frame, the rest included), the same total the
Lines table's shares use, so figures side by side agree. A training step's (schema 4) splits
dispatches into forward and backward: the backward of the autograd nodes a module's (a line's)
forward ops made, inside its totals.
"""

from __future__ import annotations

from pathlib import Path

from trnlens import units

LIBRARY_LINES_SHOWN = 10
MODULES_SHOWN = 15


def _step_total(data: dict) -> float:
    frames = data.get("frames") or []
    rest = data.get("frames_rest") or {}
    total = sum(f["self_time_per_step_us"] for f in frames)
    return total + rest.get("self_time_per_step_us", 0.0)


def _share(part: float, total: float) -> str:
    return f"{100 * part / total:.0f}%" if total > 0 else "-"


def _count(n: float) -> str:
    return f"{n:g}" if isinstance(n, float) else str(n)


def _has_backward(rows: list[dict], key: str) -> bool:
    return any(row.get(key) for row in rows)


def modules_lines(data: dict, table, shown: int | None = MODULES_SHOWN) -> list[str]:
    """The top ``shown`` modules by total time (None: all the result has)."""
    modules = data.get("modules")
    if not modules:
        return []
    backward = _has_backward(modules, "total_backward_dispatches_per_step")
    total = _step_total(data)
    ranked = sorted(modules, key=lambda m: -m["total_time_per_step_us"])
    picked = ranked if shown is None else ranked[:shown]
    order = {id(m): i for i, m in enumerate(modules)}  # the tree's preorder reads best
    picked.sort(key=lambda m: order[id(m)])
    rows = []
    for m in picked:
        total_n = m.get("total_dispatches_per_step", m["dispatches_per_step"])
        row = [
            m["name"][:60],
            m["type"][:28],
            _count(m["calls_per_step"]),
            _count(m["dispatches_per_step"]),
            _count(total_n),
        ]
        if backward:  # the total split: forward, and the backward of the nodes it made
            back_n = m.get("total_backward_dispatches_per_step", 0)
            row += [_count(total_n - back_n), _count(back_n)]
        row += [
            units.duration(m["self_time_per_step_us"]),
            units.duration(m["total_time_per_step_us"]),
        ]
        if backward:
            row.append(units.duration(m.get("total_backward_time_per_step_us", 0.0)))
        row.append(_share(m["total_time_per_step_us"], total))
        rows.append(row)
    hidden = len(modules) - len(picked)
    rest = data.get("modules_rest") or {}
    title = "Modules (per step; self: while it was the innermost module running"
    title += f"; the top {len(picked)} by total time" if hidden else ""
    if backward:
        title += "; Fwd + Bwd = Total: Bwd is the backward of the autograd nodes it made"
    out = ["", title + ")"]
    headers = ["Module", "Type", "Calls", "Self disp.", "Total disp."]
    headers += ["Fwd disp.", "Bwd disp."] if backward else []
    headers += ["Self", "Total"] + (["Bwd time"] if backward else []) + ["Share"]
    out.extend(table(headers, rows, set(range(2, len(headers)))))
    if hidden:
        out.append(f"  ... {hidden} more modules (trnlens profile --modules all lists them)")
    if rest.get("count"):
        out.append(
            f"  ... and {rest['count']} modules the run did not keep: "
            f"{_count(rest['dispatches_per_step'])} dispatches, "
            f"{units.duration(rest['self_time_per_step_us'])} (--modules all keeps them)"
        )
    return out


def library_lines(data: dict, table) -> list[str]:
    """The library source lines (code outside the project) that dispatched the most."""
    frames = [f for f in data.get("frames") or [] if not f.get("project")]
    if not frames:
        return []
    total = _step_total(data)
    backward = _has_backward(frames, "backward_dispatches_per_step")
    rows = []
    for f in frames[:LIBRARY_LINES_SHOWN]:
        library = f.get("library") or {}
        name = library.get("name") or "?"
        if library.get("version"):
            name += f" {library['version']}"
        callers = f.get("callers") or []
        called = f"{callers[0]['path']}:{callers[0]['line']}" if callers else "-"
        row = [
            f"{short_path(f['path'])}:{f['line']}",
            name,
            _share(f["self_time_per_step_us"], total),
            units.duration(f["self_time_per_step_us"]),
            _count(f["dispatches_per_step"]),
        ]
        if backward:
            back_n = f.get("backward_dispatches_per_step", 0)
            row += [_count(f["dispatches_per_step"] - back_n), _count(back_n)]
        rows.append(row + [called, _text(f["path"], f["line"])])
    title = "Library lines (self: each dispatch on the innermost line that made it"
    title += "; Bwd: the backward of the nodes its ops made)" if backward else ")"
    out = ["", title]
    headers = ["Line", "Library", "Share", "Self", "Dispatches"]
    headers += ["Fwd", "Bwd"] if backward else []
    headers += ["Called from", "Source"]
    out.extend(table(headers, rows, set(range(2, len(headers) - 2))))
    if len(frames) > LIBRARY_LINES_SHOWN:
        out.append(f"  ... {len(frames) - LIBRARY_LINES_SHOWN} more library lines (--format json)")
    return out


def short_path(path: str) -> str:
    """A library file from where its package starts (site-packages/ cut off)."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def _text(path: str, line: int) -> str:
    try:
        text = Path(path).read_text("utf-8").splitlines()[line - 1].strip()
    except (OSError, IndexError, UnicodeDecodeError):
        return ""
    return text if len(text) <= 50 else text[:47] + "..."
