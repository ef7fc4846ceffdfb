"""The measured part of a profile's text output: why the mode ran, findings, launch figures,
and (Neuron) the device profile summary. Kept apart from render.py, which lays out the figures."""

from __future__ import annotations

from trnlens import units


def mode_lines(data: dict) -> list[str]:
    out = []
    reason = data.get("mode_reason")
    if reason and reason != "requested":
        out.append(f"  mode {data['mode']}: {reason}")
    evaluated = data.get("eval_modules")
    if evaluated and evaluated.get("message"):
        out.append(f"  {evaluated['message']}")
    return out


def findings_lines(data: dict, table) -> list[str]:
    """A table of the run's measured findings, largest share first (empty when there are none)."""
    out: list[str] = []
    launch = data.get("launch")
    if launch:
        out.append("")
        out.append(
            f"Launch: {100 * launch.get('overhead_share', 0):.0f}% of the step overhead, "
            f"{100 * launch['idle_share']:.0f}% between dispatches "
            f"(median; {100 * launch['idle_share_min']:.0f}-"
            f"{100 * launch['idle_share_max']:.0f}%), "
            f"{launch['dispatches']:g} dispatches, {units.duration(launch['mean_dispatch_us'])} "
            "each on average"
        )
    findings = data.get("findings") or []
    if not findings:
        return out
    out.append("")
    out.append(f"Findings (measured in this run{basis_note(data)})")
    rows = []
    for f in findings:
        where = f"{f['path']}:{f['line']}" if f.get("path") else "-"
        rows.append(
            [
                where,
                f"{100 * f['share']:.0f}%",
                units.duration(f["time_us"]),
                f["id"],
                f["op"][:40],
            ]
        )
    out.extend(table(["Line", "Share", "Time", "Finding", "Op"], rows, {1, 2}))
    out.extend(f"  {f['id']}: {f['message']}" for f in findings)
    return out


def basis_note(data: dict) -> str:
    """Where lines' and findings' times were put on the headline's basis (agent/basis.py)."""
    scale = data.get("time_scale") or {}
    if scale.get("basis") == "unprofiled":
        return (
            f"; times: shares of the {units.duration(scale.get('total_us'))} unprofiled "
            "median, the profiler having inflated the steps"
        )
    if scale:
        return f"; times: shares of the {units.duration(scale.get('total_us'))} profiled median"
    return ""


def library_findings_lines(data: dict) -> list[str]:
    """The static rules' findings in the library code the run executed, with their measured
    cost, each under the project line that called it (libraries/rules.py)."""
    found = data.get("library_findings") or []
    if not found:
        return []
    out = ["", "Library findings (static rules on the library code this run executed, measured)"]
    for f in found:
        fix = " · fix: trnlens compare --fix measures a module swap" if f.get("fix") else ""
        out.append(f"  {f['code']} {f['message']}{fix}")
        out.append(f"    at {f['path']}:{f['line']}")
        for caller in f.get("callers") or []:
            out.append(f"    called from {caller['path']}:{caller['line']}")
    return out
