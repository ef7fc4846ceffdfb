"""What a report shows, gathered from stored runs into plain values (no markup here).

One ``RunView`` per variant: the result's facts, its op and line tables, the function's source
lines as they are on disk now (marked when the function changed since the run), one step's
timeline from the chrome trace (``trace.read_step``), artifact links relative to the report file
and the NEFF/NTFF pairs (``explorer.artifacts``). A comparison is its variants plus the figures
the agent set on each (speed-up with its range, max abs diff).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from trnlens.agent import sources as agent_sources
from trnlens.agent.notebook import cells
from trnlens.explorer import artifacts as neuron_artifacts
from trnlens.report import timeline as tl
from trnlens.report.trace import MAX_EVENTS, TraceError, read_step


@dataclass
class Link:
    label: str
    href: str  # relative to the report file
    detail: str = ""


@dataclass
class SourceLine:
    number: int
    text: str


@dataclass
class RunView:
    result: dict
    label: str
    timeline: tl.Timeline | None
    source: list[SourceLine] = field(default_factory=list)
    source_note: str | None = None
    links: list[Link] = field(default_factory=list)
    neuron: neuron_artifacts.Profile | None = None  # NEFF/NTFF pairs, runtime traces
    run_dir: Path | None = None
    report_dir: Path | None = None  # links are relative to it
    notes: list[str] = field(default_factory=list)


@dataclass
class ReportModel:
    title: str
    runs: list[RunView]
    root: Path

    @property
    def comparison(self) -> bool:
        return len(self.runs) > 1


def build(
    results: list[dict],
    root: Path,
    artifacts: Path,
    report_dir: Path,
    max_events: int = MAX_EVENTS,
) -> ReportModel:
    """``results``: one run, or a comparison's variants in order (the baseline first)."""
    sources = _Sources(root)
    views = [_view(r, root, artifacts, report_dir, sources, max_events) for r in results]
    first = results[0].get("function") or {}
    what = f"{first.get('path')}::{first.get('qualname')}"
    # the same words as the editor's tab ("Compare logits (3 variants)", lsp/report.py)
    title = (
        f"trnlens: {what}"
        if len(results) == 1
        else f"trnlens: compare {what} ({len(results)} variants)"
    )
    return ReportModel(title, views, root)


def _label(result: dict) -> str:
    variant = result.get("variant") or {}
    return str(variant.get("label") or (result.get("function") or {}).get("qualname") or "run")


def _view(result, root, artifacts, report_dir, sources, max_events) -> RunView:
    label = _label(result)
    run_dir = artifacts / str(result.get("run_id"))
    view = RunView(result, label, None, run_dir=run_dir, report_dir=report_dir)
    trace_entry = next(
        (a for a in result.get("artifacts") or [] if a.get("kind") == "chrome_trace"), None
    )
    trace_path = _inside(run_dir, trace_entry.get("path")) if trace_entry else None
    if trace_path is not None and trace_path.is_file():
        try:
            step = read_step(trace_path, max_events)
            view.timeline = tl.build(step, result, label)
        except TraceError as exc:
            view.notes.append(f"no timeline: {exc}")
        view.links.append(
            Link("chrome trace", relative(trace_path, report_dir),
                 "open in Perfetto (ui.perfetto.dev) or chrome://tracing")
        )  # fmt: skip
    elif result.get("error"):
        view.notes.append("no timeline: the run failed")
    else:
        view.notes.append("no timeline: the run's chrome trace is not stored (pruned, or off)")
    profile = neuron_artifacts.find(run_dir) if run_dir.is_dir() else None
    if profile is not None and profile.found:
        view.neuron = profile
    view.source, view.source_note = sources.function(result)
    return view


def _inside(run_dir: Path, relative: str | None) -> Path | None:
    if not relative:
        return None
    path = (run_dir / relative).resolve()
    return path if path.is_relative_to(run_dir.resolve()) else None


def relative(path: Path, report_dir: Path) -> str:
    return Path(os.path.relpath(path, report_dir)).as_posix()


class _Sources:
    """The profiled functions' source lines, read once per file, never outside the project."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.files: dict[str, str | None] = {}

    def text(self, relpath: str) -> str | None:
        if relpath not in self.files:
            path = (self.root / relpath).resolve()
            try:
                inside = path.is_relative_to(self.root)
                text = path.read_text("utf-8") if inside else None
                if text is not None and relpath.endswith(".ipynb"):
                    # a notebook ran as its code cells joined: the result's lines count there
                    text = cells.join_notebook(text).text
                self.files[relpath] = text
            except (OSError, UnicodeDecodeError, cells.NotebookError):
                self.files[relpath] = None
        return self.files[relpath]

    def line(self, relpath: str, number: int) -> str | None:
        text = self.text(relpath)
        if text is None:
            return None
        lines = text.splitlines()
        return lines[number - 1] if 0 < number <= len(lines) else None

    def function(self, result: dict) -> tuple[list[SourceLine], str | None]:
        fn = result.get("function") or {}
        path, qualname = fn.get("path"), fn.get("qualname")
        variant = result.get("variant") or {}
        if variant.get("kind") == "source":
            return [], "this variant ran as source text (the analysis' fix): not in a file"
        if not isinstance(path, str) or not isinstance(qualname, str):
            return [], "the result names no function in a file"
        text = self.text(path)
        if text is None:
            return [], f"{path} cannot be read here"
        try:
            definition = agent_sources.find_definition(text, qualname, path)
        except (SyntaxError, agent_sources.DefinitionNotFound):
            return [], f"{qualname} is no longer in {path}"
        lines = text.splitlines()
        first, last = definition.start_line, definition.end_line  # decorators included
        same = not fn.get("source_hash") or (
            agent_sources.source_hash(text, definition) == fn["source_hash"]
        )
        # The run may have measured an unsaved buffer (an editor's, a notebook's cells) where
        # lines above the function were added or taken away: the same function, moved. Its
        # lines are numbered as the run counted them, so that the figures land on them.
        run_line = fn.get("line")
        moved = run_line - definition.def_line if same and isinstance(run_line, int) else 0
        shown = [SourceLine(n + moved, lines[n - 1]) for n in range(first, last + 1)
                 if n <= len(lines)]  # fmt: skip
        note = None
        if not same:
            note = "the function changed since this run: lines may not match the figures"
        return shown, note
