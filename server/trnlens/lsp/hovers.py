"""Hovers on a profiled line or function: its ops as a Markdown table, the run's provenance.

On a measured line: the ops that line dispatched, with each op's time apportioned by the line's
share of that op's calls. On a function's header: the run's ops, most expensive first. Both end
with the run's backend, device, target, mode and age, a link to the chrome trace and, for a
Neuron run, its NEFF/NTFF pairs and runtime traces with their sizes.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from trnlens import memoryfigures, speedup
from trnlens.agent import stability
from trnlens.agent.notebook.cells import cell_label
from trnlens.lsp import (
    compiled,
    format,
    library,
    markdown,
    memory,
    rank_hints,
    run_findings,
    xla_figures,
)
from trnlens.lsp.documents import Placement, ProfiledDocument
from trnlens.lsp.report import hover_link as report_link

# A hover is a glance, not a page (VS Code's hover grows to a few screens): the top few ops,
# and the rest behind the "Open run report" link at its end.
MAX_OPS = 5
# A stored run's folder does not change (pruning only removes what these lines would list, and
# a pruned run's hover then still names its files): walked once per run, in a worker thread.
_NEURON_LINES: dict[Path, list[str]] = {}
_NEURON_LINES_KEPT = 512

# Markdown tables in VS Code's hovers have no cell padding: "1 | 9.51 ms" reads "19.51 ms". A
# client whose Markdown parser is declared (LSP's general.markdown: VS Code's "marked") renders
# HTML entities, so its cells get non-breaking spaces; others (Neovim shows the source) do not.
PAD = "&nbsp;&nbsp;"
# The advice in a result's warnings names CLI flags; in the editor the settings do that job.
_FLAGS = {"--steps": "trnlens.steps", "--repeats": "trnlens.repeats", "--warmup": "trnlens.warmup"}


def placement_at(doc: ProfiledDocument, position: types.Position) -> Placement | None:
    """The placed run a hover at ``position`` talks about (a measured line's, or its def's)."""
    for line, _, placement in doc.line_figures():
        if line == position.line:
            return placement
    analysis = doc.analysis()
    symbol = analysis.symbol_at(position.line) if analysis else None
    return doc.placements.get(symbol.qualname) if symbol else None


def hover(
    doc: ProfiledDocument,
    position: types.Position,
    artifacts: Path | None,
    compared: dict[str, dict] | None = None,
    pad: bool = False,
) -> types.Hover | None:
    """``compared``: the document's finished comparisons by qualname (``analysis.summarize``'s
    answers), shown on the compared function's header."""
    for line, entry, placement in doc.line_figures():
        if line == position.line:
            called = library.hover_lines(placement, entry["line"], doc.relpath)
            table = _line_table(entry, placement, pad) + "".join("\n" + x for x in called)
            return _markdown(table + _footer(doc, placement, artifacts))
    header = placement_at(doc, position)
    if header is None:
        return None
    answer = (compared or {}).get(header.result.qualname)
    extra = comparison_lines(answer) if answer else ""
    return _markdown(_function_table(header, pad) + extra + _footer(doc, header, artifacts))


def comparison_lines(answer: dict) -> str:
    """The function's last comparison: each variant's verdict (a range containing 1.0 reads
    'no measurable difference'), its range, whether its figures are noisy, and the outputs."""
    rows = ["", "", f"**compared** ({markdown.text(speedup.METHOD)}):"]
    for row in answer.get("variants") or []:
        label = markdown.text(str(row.get("label")))
        if row.get("error"):
            rows.append(f"- {label}: failed: {_escape(str(row['error']))}")
            continue
        span = row.get("speedupRange")
        text = f"- {label}: {row.get('verdict')}"
        if span and row.get("verdict") != "baseline":
            text += f" ({speedup.span_text(span, '×', '–')})"
        if row.get("noisy"):
            text += " · noisy"
        rows.append(text)
    if answer.get("outputsNotComparable"):
        rows.append(f"- {_escape(answer['outputsNotComparable'])}")
    return "\n".join(rows)


def neuron_lines(run_dir: Path) -> list[str]:
    """The run's Neuron lines, kept once walked (the server calls this in a worker thread before
    answering a hover, so that the hover itself finds them here)."""
    found = _NEURON_LINES.get(run_dir)
    if found is None:
        found = _neuron_lines(run_dir)
        if len(_NEURON_LINES) >= _NEURON_LINES_KEPT:
            _NEURON_LINES.clear()
        _NEURON_LINES[run_dir] = found
    return found


def _row(cells: list[str], pad: bool) -> str:
    """A table row; with ``pad``, a gap before every cell but the first."""
    if pad:
        cells = [cells[0], *(f"{PAD}{cell}" for cell in cells[1:])]
    return "| " + " | ".join(cells) + " |"


def _device_column(placement: Placement) -> bool:
    """Whether op time differs from CPU time: on the CPU backend it is the same figure."""
    ops = placement.result.data.get("ops") or []
    return any(
        format.duration(op.get("self_cpu_us")) != format.duration(op.get("self_device_us"))
        for op in ops
    )


def settings_not_flags(text: str) -> str:
    for flag, setting in _FLAGS.items():
        text = text.replace(f"({flag})", f"({setting})").replace(flag, setting)
    return text


def _markdown(text: str) -> types.Hover:
    return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, text))


def _escape(text: str) -> str:
    return markdown.text(text)


def _header(placement: Placement, pad: bool) -> list[str]:
    if _device_column(placement):
        device = markdown.text(placement.result.device_label)
        return [_row(["op", "calls", "CPU", device, "shapes"], pad), "|---|---:|---:|---:|---|"]
    return [_row(["op", "calls", "CPU", "shapes"], pad), "|---|---:|---:|---|"]


def _op_row(name: str, calls: float, cpu_us, device_us, shapes: str, device: bool, pad: bool):
    cells = [markdown.code(name), f"{calls:g}", format.duration(cpu_us)]
    if device:
        cells.append(format.duration(device_us))
    cells.append(_escape(shapes))
    return _row(cells, pad)


def _profiled(entry: dict, result) -> str:
    """The line's profiled time beside its share of the headline: on the cpu backend its
    device time is CPU time, rescaled alike (agent/basis.py), so the profiled figure is the one
    to add ('1.44 ms unprofiled share · 1.72 ms CPU (ops) profiled', not '· 1.44 ms CPU')."""
    if result.time_basis == "cpu":
        profiled = entry.get("profiled_device_us")
        if profiled is None or profiled == entry.get("device_us"):
            return ""
        return f"{format.duration(profiled)} {result.device_label} profiled · "
    return f"{format.duration(entry.get('profiled_cpu_us', entry.get('cpu_us')))} CPU profiled · "


def _line_name(entry: dict) -> str:
    """``**line 6** (cell 3)`` in a notebook: the line as its cell numbers it, which is what the
    editor shows beside it (the run counts lines in the joined cells), the cell as the CLI and
    the report name it; ``**line 13**`` in a file."""
    cell = entry.get("cell")
    if isinstance(cell, dict) and isinstance(cell.get("line"), int):
        return f"**line {cell['line']}** ({cell_label(cell['index'])})"
    return f"**line {entry['line']}**"


def _line_table(entry: dict, placement: Placement, pad: bool = False) -> str:
    result = placement.result
    ops = {op["name"]: op for op in result.data.get("ops") or []}
    total = placement.line_total()
    share = f"{100 * (entry.get('device_us') or 0) / total:.0f}% · " if total else ""
    rows = [
        f"{_line_name(entry)} of {markdown.code(result.qualname)}: {share}"
        f"{format.duration(entry.get('device_us'))} {result.part_label} · "
        f"{_profiled(entry, result)}"
        f"{format.count(entry.get('dispatches'), 'dispatch')} per step",
        "",
        *_header(placement, pad),
    ]
    device = _device_column(placement)
    ranked = sorted((entry.get("ops") or {}).items(), key=lambda kv: -kv[1])
    for name, calls in ranked[:MAX_OPS]:
        op = ops.get(name, {})
        part = calls / op["calls"] if op.get("calls") else 0
        rows.append(
            _op_row(
                name,
                calls,
                op.get("self_cpu_us", 0) * part,
                op.get("self_device_us", 0) * part,
                format.shapes(op.get("input_shapes"), limit=1),
                device,
                pad,
            )  # fmt: skip
        )
    if len(ranked) > MAX_OPS:
        rows.append(_row([f"… {len(ranked) - MAX_OPS} more", *[""] * (4 if device else 3)], False))
    rows.append("")
    rows.append("_op times are the run's per-step self times, shared out by this line's calls_")
    return "\n".join(rows)


def _function_table(placement: Placement, pad: bool = False) -> str:
    result = placement.result
    if result.error:
        message = _escape(str(result.error.get("message")))
        live = memoryfigures.out_of_memory_words(result.error)
        said = f"\n\n{markdown.text(live)}" if live else ""
        return f"**{markdown.text(result.qualname)}** failed: {message}{said}"
    ops = sorted(result.data.get("ops") or [], key=lambda op: -(op.get("self_device_us") or 0))
    # The ops the function's lines dispatched, not what they call inside (aten::to ->
    # aten::_to_copy -> aten::copy_...): 6 dispatches read as 6 rows, not 13.
    lines = result.data.get("lines") or []
    dispatched = {name for entry in lines for name in entry.get("ops") or {}}
    nested = [op for op in ops if dispatched and op["name"] not in dispatched]
    ops = [op for op in ops if not dispatched or op["name"] in dispatched]
    rows = [
        f"**{markdown.text(result.qualname)}**: {format.headline(result, per_step=True)}",
        "",
        *_header(placement, pad),
    ]
    device = _device_column(placement)
    for op in ops[:MAX_OPS]:
        rows.append(
            _op_row(
                op["name"],
                op.get("calls", 0),
                op.get("self_cpu_us"),
                op.get("self_device_us"),
                format.shapes(op.get("input_shapes")),
                device,
                pad,
            )  # fmt: skip
        )
    if len(ops) > MAX_OPS:
        rows.append(_row([f"… {len(ops) - MAX_OPS} more", *[""] * (4 if device else 3)], False))
    if nested:
        rows.append("")
        rows.append(f"_and {format.count(len(nested), 'op')} they called inside (in the report)_")
    rows.extend(compiled.hover_lines(result))  # a compiled run's graphs
    rows.extend(rank_hints.hover_lines(result))  # a multi-rank run's ranks
    rows.extend(xla_figures.hover_lines(result))  # an XLA run's graphs and compilations
    rows.extend(memory.hover_lines(result))  # the peak by kind, growth
    return "\n".join(rows)


def _footer(doc: ProfiledDocument, placement: Placement, artifacts: Path | None) -> str:
    data = placement.result.data
    lines = [
        "",
        "",
        f"backend {markdown.code(data.get('backend'))} · device {markdown.code(data.get('device'))}"
        f" · target {markdown.code(data.get('target'))} · mode {markdown.code(data.get('mode'))}"
        f" · {format.age(data['created_at'])}",
        *run_findings.hover_lines(data),
    ]
    if doc.is_stale(placement):
        lines.append("")
        lines.append("**stale**: the function's source changed since this run")
    if (data.get("stability") or {}).get("noisy"):  # the warnings say why and what to do
        unstable = [w for w in data.get("warnings") or [] if stability.is_stability_warning(w)]
        lines.extend(["", _unstable(unstable)])
    trace = next((a for a in data.get("artifacts") or [] if a.get("kind") == "chrome_trace"), None)
    if trace and artifacts is not None:
        run_dir = (artifacts / placement.result.run_id).resolve()
        path = (run_dir / str(trace.get("path"))).resolve()
        if path.is_relative_to(run_dir):  # a planted result cannot link outside its run
            lines.append("")
            lines.append(f"[chrome trace]({path.as_uri()}) (open in Perfetto or chrome://tracing)")
    if artifacts is not None:
        lines.extend(neuron_lines(artifacts / placement.result.run_id))
        lines.extend(["", report_link(doc, placement)])
    return "\n".join(lines)


def _unstable(warnings: list[str]) -> str:
    """One line for the run's stability warnings: the first one's first sentence and the advice;
    the rest in the report and ``trnlens profile``."""
    said = [w for w in warnings if not w.startswith(stability.ADVICE_PREFIX)]
    advice = [w for w in warnings if w.startswith(stability.ADVICE_PREFIX)]
    if not said:
        return "**not stable** (the report says why)"
    first = first_clause(settings_not_flags(said[0])).rstrip(" .:")
    more = (
        f" ({format.count(len(said) - 1, 'more warning')} in the report)" if len(said) > 1 else ""
    )
    todo = settings_not_flags(advice[0]) if advice else ""
    todo = f". {todo[0].upper()}{todo[1:]}" if todo else ""
    return f"**not stable**: {_escape(first)}{more}{_escape(todo)}"


def first_clause(text: str) -> str:
    """``text`` up to its first "; " or ". " outside brackets: a cut inside one left "(23.2 ms
    to 48 ms, median 33 ms over 20" with its bracket never closed."""
    depth = 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and char in ";." and text[i + 1 : i + 2] == " ":
            return text[:i]
    return text


def _neuron_lines(run_dir: Path) -> list[str]:
    """The run's NEFF/NTFF pairs and runtime traces with sizes (nothing when it has none)."""
    from trnlens.explorer import artifacts as neuron_artifacts

    profile = neuron_artifacts.find(run_dir)
    if not profile.found:
        return []
    return ["", "**Neuron profile** (`trnlens explorer` opens it in Neuron Explorer):", ""] + (
        neuron_artifacts.summary_lines(profile)
    )
