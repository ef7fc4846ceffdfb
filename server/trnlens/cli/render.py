"""Text rendering of results for the terminal: figures with scaled units, tables, warnings."""

from __future__ import annotations

from pathlib import Path

from trnlens import memoryfigures, units
from trnlens import speedup as speed
from trnlens.cli.notebook_lines import cell_source_line
from trnlens.cli.render_attribution import MODULES_SHOWN, library_lines, modules_lines
from trnlens.cli.render_compile import comparison_lines, compile_lines
from trnlens.cli.render_findings import (
    basis_note,
    findings_lines,
    library_findings_lines,
    mode_lines,
)
from trnlens.cli.render_memory import comparison_memory_lines, memory_lines
from trnlens.cli.render_ranks import ranks_lines
from trnlens.cli.render_xla import comparison_xla_lines, xla_lines
from trnlens.headline import headline as run_headline
from trnlens.results import Result


def fmt_time(us: float | None) -> str:
    return units.duration(us)


def fmt_bytes(n: float | None) -> str:
    return units.data_size(n)


def fmt_count(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n:g}" if isinstance(n, float) else str(n)


def table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells):
        out = []
        for i, cell in enumerate(cells):
            out.append(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]))
        return "  " + "  ".join(out).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _line_of(path: Path, line: int) -> str:
    return path.read_text("utf-8").splitlines()[line - 1]


def _source_line(root: Path | None, path: str, line: int) -> str:
    if root is None:
        return ""
    in_cell = cell_source_line(root, path, line)
    try:
        text = (in_cell if in_cell is not None else _line_of(root / path, line)).strip()
    except (OSError, IndexError, UnicodeDecodeError):
        return ""
    return text if len(text) <= 60 else text[:57] + "..."


def render_result(
    data: dict,
    root: Path | None = None,
    store_dir: Path | None = None,
    modules: int | None = MODULES_SHOWN,
) -> str:
    """The run as text; ``modules``: how many modules the Modules table shows (None: all)."""
    r = Result(data)
    dev = r.device_label
    head = (
        f"{r.identity}  ·  {data['target']}  ·  {data['backend']}: {data['device']}  ·  "
        f"{data['mode']}"
    )
    out = [head, *mode_lines(data)]
    if data["function"].get("unsaved"):
        out.append("(profiled the unsaved editor buffer)")
    if r.error:
        e = r.error
        where = f" at {e['path']}:{e['line']}" if e.get("path") else ""
        out.append(f"error{where}: {e['message']}")
        live = memoryfigures.out_of_memory_words(e)
        if live:  # an outcome, not a traceback: what to act on is what held the memory
            out.append(f"  {live}")
        elif e.get("traceback"):
            out.append(e["traceback"].rstrip())
        out.extend(f"warning: {w}" for w in data.get("warnings", []))
        return "\n".join(out)
    if data.get("backend") == "xla":
        out.append(
            "time basis: host (xla: the profiler sees the host trace the lazy ops, then each "
            "step's sync compile and execute the graph; the XLA section has the device's "
            "execute time)"
        )
    elif r.time_basis == "cpu":
        out.append(
            "time basis: CPU (the cpu backend runs ops on the host; no accelerator time is claimed)"
        )
    shown = run_headline(data)
    basis = "the timing pass's median" if shown.basis == "unprofiled" else "no timing pass"
    out.append(f"headline: {shown.text} per step ({basis}; the figure the editor shows)")
    figures = [f"{fmt_count(data['dispatches_per_step'])} dispatches/step"]
    if data.get("kernel_launches_per_step") is not None:
        figures.append(f"{fmt_count(data['kernel_launches_per_step'])} kernels/step")
    figures += [
        f"{fmt_time(data['device_time_per_step_us'])} {dev}",
        f"{fmt_time(data['cpu_time_per_step_us'])} CPU (step)",
        f"{fmt_time(data['wall_time_per_step_us'])} wall",
    ]
    if data.get("peak_memory_bytes") is not None and data.get("memory") is None:
        figures.append(f"peak +{fmt_bytes(data['peak_memory_bytes'])}")
    out.append("  " + "  ·  ".join(figures) + "  (medians over the same profiled steps)")
    profiled = data.get("profiled_timing")
    if profiled:
        out.append(
            f"  profiled steps: median {fmt_time(profiled['median_us'])} "
            f"(min {fmt_time(profiled['min_us'])}, max {fmt_time(profiled['max_us'])}) "
            f"over {profiled['steps']} steps{_faults(profiled)}{_left_out(profiled)}"
        )
    timing = data.get("timing")
    if timing:
        out.append(
            f"  timing pass (no profiler): median {fmt_time(timing['median_us'])} "
            f"(min {fmt_time(timing['min_us'])}, max {fmt_time(timing['max_us'])}) "
            f"over {timing['repeats']} calls{_faults(timing)}"
        )
    if (data.get("stability") or {}).get("noisy"):
        out.append("  these figures are NOT stable: see the warnings below for why and what to do")
    out.append(f"  {data['warmup']} warm-up steps, {data['steps']} profiled steps")
    out.extend(ranks_lines(data, table))
    out.append("")
    out.append("Ops (per step)")
    device_columns = r.time_basis != "cpu"
    headers = ["Name", "Self CPU", "CPU total"]
    if device_columns:
        headers += [f"Self {dev}", f"{dev} total"]
    headers += ["Calls", "Input shapes"]
    rows = []
    for op in data["ops"][:15]:
        row = [op["name"][:48], fmt_time(op["self_cpu_us"]), fmt_time(op["cpu_total_us"])]
        if device_columns:
            row += [fmt_time(op["self_device_us"]), fmt_time(op["device_total_us"])]
        shapes = op.get("input_shapes") or []
        row += [fmt_count(op["calls"]), str(shapes[0]) if shapes else ""]
        rows.append(row)
    right = set(range(1, len(headers) - 1))
    out.extend(table(headers, rows, right))
    if data["lines"]:
        out.append("")
        out.append(
            "Lines (self: each dispatch counts on the innermost project line that called it"
            f"{basis_note(data)})"
        )
        total = sum(line["device_us"] for line in data["lines"]) or 1.0
        # A training step's lines (schema 4) carry the backward of the nodes their forward ops
        # made: a column of its own, the part of the line's dispatches and time it is.
        backward = any(line.get("backward") for line in data["lines"])
        rows = []
        for line in sorted(data["lines"], key=lambda x: -x["device_us"]):
            row = [
                f"{line['path']}:{line['line']}",
                f"{100 * line['device_us'] / total:.0f}%",
                fmt_time(line["device_us"]),
                fmt_count(line["dispatches"]),
            ]
            if backward:
                part = line.get("backward") or {}
                row += [fmt_count(part.get("dispatches", 0)), fmt_time(part.get("device_us", 0.0))]
            row.append(line.get("label") or _source_line(root, line["path"], line["line"]))
            rows.append(row)
        headers = ["Line", "Share", r.part_label, "Dispatches"]
        headers += ["Bwd disp.", "Bwd time"] if backward else []
        out.extend(table(headers + ["Source"], rows, set(range(1, len(headers)))))
    out.extend(modules_lines(data, table, modules))
    out.extend(library_lines(data, table))
    out.extend(compile_lines(data))
    out.extend(xla_lines(data, table, fmt_bytes))
    out.extend(findings_lines(data, table))
    out.extend(memory_lines(data))
    out.extend(library_findings_lines(data))
    for warning in dict.fromkeys(data.get("warnings", [])):  # each once
        out.append(f"warning: {warning}")
    if store_dir is not None:
        for artifact in data.get("artifacts", []):
            out.append(f"{artifact['kind']}: {store_dir / r.run_id / artifact['path']}")
    out.append(f"run: {r.run_id}")
    return "\n".join(out)


def render_comparison(data: dict) -> str:
    variants = data["variants"]
    base = variants[data.get("baseline", 0)]
    dev = Result(base).device_label
    headers = ["Variant", "Dispatches", f"{dev}/step (profiled)", "Headline/step", "Speed-up",
               "Range", "Verdict", "Max |diff|"]  # fmt: skip
    rows = []
    not_comparable = data.get("outputs_not_comparable")
    for i, v in enumerate(variants):
        label = speed.variant_label(v)
        if i == data.get("baseline", 0):
            label += " (baseline)"
        if v.get("error"):
            rows.append([label, "error", v["error"]["message"][:40], "", "", "", "", ""])
            continue
        factor = data["speedups"][i]
        span = (data.get("speedup_ranges") or [None] * len(variants))[i]
        diff = (data.get("max_abs_diff") or [None] * len(variants))[i]
        verdict = "baseline" if i == data.get("baseline", 0) else speed.verdict(factor, span)
        if speed.noisy(v):
            verdict += " (noisy)"
        rows.append(
            [
                label,
                fmt_count(v["dispatches_per_step"]),
                fmt_time(v["device_time_per_step_us"]),
                run_headline(v).text,  # the medians the speed-ups are the ratios of
                speed.factor(factor),
                speed.span_text(span),
                verdict,
                speed.NOT_COMPARABLE
                if not_comparable
                else (f"{diff:.2e}" if diff is not None else "-"),
            ]
        )
    out = table(headers, rows, {1, 2, 3, 4, 5, 7})
    out.insert(0, f"{base['backend']}: {base['device']}  ·  {base['mode']}")
    if data.get("speedup_method") == "rounds":
        out.append(speed.METHOD)
    out.extend(comparison_lines(data))  # what torch.compile did in the compiled variants
    out.extend(comparison_xla_lines(data, table))  # graphs and IR nodes per variant on XLA
    out.extend(comparison_memory_lines(data, table))  # each variant's peak and growth
    shared = [*(data.get("warnings") or []), *([not_comparable] if not_comparable else [])]
    out.extend(f"warning: {w}" for w in speed.variant_warnings(variants, shared))
    return "\n".join(out)


def _faults(figures: dict) -> str:
    """The page faults per step, where the steps faulted in fresh memory (see the warnings)."""
    faults = figures.get("page_faults") or 0
    return f", {faults:,.0f} page faults/step" if faults else ""


def _left_out(profiled: dict) -> str:
    left = profiled.get("faulted_steps")
    if not left:
        return ""
    return f" ({left} more faulted in memory the profiler's buffers displaced: left out)"
