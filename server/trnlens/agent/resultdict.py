"""The result dict of one run: its empty form, the measurement's figures, the notes around it.

The agent writes plain dicts (it cannot import the server's result model); their shape is
``server/trnlens/schema/result.schema.json``.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import uuid
from typing import Any

from . import loader
from .executed import fingerprint
from .measure import Measurement, Settings
from .protocol import SCHEMA_VERSION

# The measurement's fields a result carries under the same names.
MEASURED = (
    "dispatches_per_step",
    "wall_time_per_step_us",
    "cpu_time_per_step_us",
    "device_time_per_step_us",
    "peak_memory_bytes",
    "first_call_us",
    "ops",
    "kernels",
    "kernel_launches_per_step",
    "lines",
    "timing",
    "profiled_timing",
    "stability",
    "artifacts",
    "findings",
    "launch",
    "time_scale",
    "memory",
)
# The attribution's (breakdown.py), present only when it ran.
ATTRIBUTED = ("frames", "frames_rest", "modules", "modules_rest", "host_syncs", "library_files")


def new_run_id() -> str:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{now}-{uuid.uuid4().hex[:8]}"


def base_result(
    run_id: str,
    variant: dict,
    project: loader.Project,
    backend: Any,
    mode: str,
    settings: Settings,
    context: dict,
) -> dict:
    """A run's result before anything ran: what was asked, where, on what."""
    path = os.path.abspath(os.path.join(project.root, variant["path"]))
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
        "function": {
            "path": project.relpath(path),
            "qualname": variant.get("qualname"),
            "source_hash": None,
            "unsaved": path in project.files,
            "line": None,
            "end_line": None,
        },
        "variant": {
            "label": variant.get("label") or default_label(variant),
            "kind": variant_kind(variant),
            "source_hash": None,
        },
        "target": context.get("target", "local"),
        "host": socket.gethostname(),
        "backend": backend.name,
        "device": backend.device_name(),
        "time_basis": backend.time_basis,
        "versions": backend.versions(),
        "git_commit": context.get("git_commit"),
        "mode": mode,
        "inputs": None,
        "warmup": settings.warmup,
        "steps": settings.steps,
        "dispatches_per_step": None,
        "wall_time_per_step_us": None,
        "cpu_time_per_step_us": None,
        "device_time_per_step_us": None,
        "peak_memory_bytes": None,
        "first_call_us": None,
        "ops": [],
        "lines": [],
        "timing": None,
        "artifacts": [],
        "warnings": [],
        "error": None,
    }


def variant_kind(variant: dict) -> str:
    if variant.get("source"):
        return "source"
    if variant.get("module_swaps"):
        return "swap"
    return "compiled" if variant.get("compile") else "function"


def default_label(variant: dict) -> str:
    label = variant.get("qualname") or "?"
    if variant.get("source"):
        return f"{label} (fixed)"
    if variant.get("compile"):
        return f"{label} (compiled)"
    return label


def record(result: dict, m: Measurement, project: loader.Project) -> None:
    """The measurement's figures into the result (line texts read from the project)."""
    for key in MEASURED:
        result[key] = getattr(m, key)
    add_line_texts(result["lines"], project)
    if m.attribution_us is not None:
        result["accounting"]["attribution_us"] = m.attribution_us
    if m.frames is not None:
        for key in ATTRIBUTED:
            result[key] = getattr(m, key)
    if m.rank_timeline is not None:
        result["rank_timeline"] = m.rank_timeline
    if m.dispatch_sites is not None:
        result["dispatch_sites"] = m.dispatch_sites
        result["dispatch_shapes"] = m.dispatch_shapes
    result["warnings"].extend(m.warnings)
    # what ran in the project, hashed: the editor marks the run stale when any of it changes
    result["executed"] = fingerprint.fingerprint(result, project)


def add_line_texts(lines: list[dict], project: loader.Project) -> None:
    """Each measured line's source text (stripped): ``trnlens diff`` matches lines of two runs
    by it, so that a line keeps its figures when an edit above it moved it."""
    texts: dict[str, list[str] | None] = {}
    for entry in lines or []:
        path = entry.get("path")
        if not isinstance(path, str):
            continue
        if path not in texts:
            try:
                texts[path] = project.read(os.path.join(project.root, path)).splitlines()
            except (OSError, UnicodeDecodeError):
                texts[path] = None
        found = texts[path]
        line = entry.get("line") or 0
        if found is not None and 0 < line <= len(found):
            entry["text"] = found[line - 1].strip()


def machine_load_warning() -> str | None:
    """Other work on the machine makes timings noisy (and OpenMP barriers slow): say so."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return None
    cores = os.cpu_count() or 1
    if load <= cores:
        return None
    return (
        f"the machine is busy (load {load:.1f} on {cores} cores): timings are noisy; "
        "compare runs made under similar load"
    )
