"""The compact table a ``%trnlens`` magic prints in the cell's output: the headline figures and
the measured lines, each named by its notebook cell and the line there."""

from __future__ import annotations

from typing import Any

from trnlens import memoryfigures, units
from trnlens.cli.notebook_lines import in_cells
from trnlens.cli.render import fmt_count, fmt_time, table

LINES_SHOWN = 8


def compact(result: dict[str, Any]) -> str:
    data = in_cells(result)
    function = data["function"]
    where = f"{function['path']}::{function['qualname']}"
    out = [f"trnlens · {where} · {data['backend']} · {data['mode']}"]
    error = data.get("error")
    if error:
        where = f" at {error['path']}:{error['line']}" if error.get("path") else ""
        out.append(f"error{where}: {error['message']}")
        return "\n".join(out)
    timing = data.get("timing") or {}
    figures = [
        f"{fmt_count(data['dispatches_per_step'])} dispatches/step",
        f"{fmt_time(data['cpu_time_per_step_us'])} CPU/step (profiled)",
    ]
    if timing.get("median_us") is not None:
        figures.append(f"median {fmt_time(timing['median_us'])} over {timing['repeats']} calls")
    out.append("  " + "  ·  ".join(figures))
    memory = _memory(data)
    if memory:
        out.append(f"  memory: {memory}")
    lines = sorted(data.get("lines") or [], key=lambda x: -(x.get("device_us") or 0))
    total = sum(x.get("device_us") or 0 for x in lines) or 1.0
    rows = [
        [
            f"{x['path']}:{x['line']}",
            f"{100 * (x.get('device_us') or 0) / total:.0f}%",
            fmt_time(x.get("device_us")),
            fmt_count(x.get("dispatches")),
            (x.get("label") or x.get("text") or "")[:60],
        ]
        for x in lines[:LINES_SHOWN]
    ]
    if rows:
        out.extend(table(["Line", "Share", "Time", "Dispatches", "Source"], rows, {1, 2, 3}))
    out.extend(f"warning: {w}" for w in dict.fromkeys(data.get("warnings") or []))
    out.append(f"run {data['run_id']} stored in .trnlens/ ({_where_shown(data)})")
    return "\n".join(out)


def _memory(data: dict[str, Any]) -> str | None:
    """``peak 276.8 KB in optimizer (nb.ipynb:cell 2:6) · GROWS 4.0 KB a step at ...``: the
    memory pass's peak and any growth, said loudly, in the cell's own lines."""
    memory = memoryfigures.read(data)
    if memory is None:
        return None
    said = memoryfigures.peak_words(memory)
    if memory.grows:
        top = memory.growth[0] if memory.growth else None
        at = f" at {top.path}:{top.line}" if top is not None and top.path else ""
        said += f" · GROWS {units.data_size(memory.growth_per_step_bytes)} a step{at}"
    return said


def _where_shown(result: dict[str, Any]) -> str:
    """Where else the run can be seen: on the notebook's cells when the kernel's notebook file
    is known and saved (the run is placed on it); else (a plain IPython, a cell not saved yet)
    there are no cells to show it on, and the report is the way."""
    if result.get("notebook") and str(result["function"]["path"]).endswith(".ipynb"):
        return "the editor shows it on the notebook's cells"
    return f"not in a saved notebook, so no editor shows it: trnlens report {result['run_id']}"
