"""An open Python document as the server sees it: its definitions and the runs placed on it.

The text is parsed at most once per version (lenses, hints and hovers all ask). When the text does
not parse (mid-edit), the last good parse is kept and its definition lines follow the edits, so
lenses do not jump or vanish while the user types. Runs are *placed* on the document: each keeps
the measured lines it reported for this file, anchored so they follow edits (see ``anchors``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trnlens import memoryfigures
from trnlens.agent import sources
from trnlens.agent.executed.fingerprint import module_hash
from trnlens.agent.notebook.cells import Joined
from trnlens.headline import headline as run_headline
from trnlens.libraries.callers import calling_lines
from trnlens.lsp.anchors import Change, LineAnchors, diff_map
from trnlens.lsp.outline import Definition, outline
from trnlens.lsp.placement import has_directive
from trnlens.results import Result

_IMPORTS_TORCH = re.compile(r"^[ \t]*(import[ \t]+torch\b|from[ \t]+torch[ \t.])", re.MULTILINE)
# `# trnlens: inputs=NAME`: NAME builds another function's arguments; it is no profile target
SUPERSEDED_KEPT = 4  # earlier runs kept per function for Undo
_INPUTS_DIRECTIVE = re.compile(r"#\s*trnlens:.*?\binputs\s*=\s*([A-Za-z_]\w*)")
# The header of the module-swap helper trnlens writes (libraries/swap.py): "# trnlens TRN001: …"
_SWAP_HELPER = re.compile(r"^\s*#\s*trnlens TRN\d+:")


@dataclass(frozen=True)
class Symbol:
    """A function, method or nn.Module class, with 0-based lines of the parsed version."""

    qualname: str
    kind: str  # "function", "method" or "class"
    def_line: int
    start_line: int
    end_line: int
    def_column: int
    # Uses torch or carries a ``# trnlens:`` directive: gets a lens by default (see placement).
    suggested: bool = True


@dataclass
class Analysis:
    """One successful parse: the profilable symbols, their lines following later edits."""

    text: str
    symbols: dict[str, Symbol]
    imports_torch: bool
    anchors: LineAnchors  # def lines of the parsed version -> now
    modules: set[str] = field(default_factory=set)  # qualnames of the nn.Module classes
    # 1-based (first decorator, last line) of every function and method, duplicates included
    function_spans: tuple[tuple[int, int], ...] = ()
    _hashes: dict[str, str] = field(default_factory=dict)
    _module_hash: str | None = None

    def module_hash(self) -> str:
        """The hash of the code outside functions (agent/executed/fingerprint.py)."""
        if self._module_hash is None:
            self._module_hash = module_hash(self.text, self.function_spans)
        return self._module_hash

    def def_line_now(self, symbol: Symbol) -> int | None:
        return self.anchors.get(symbol.def_line)

    def header_line_now(self, symbol: Symbol) -> int | None:
        """Where the definition starts now: its first decorator, else its ``def``. Lenses go
        here, above the decorators (as Pylance's and GitLens's do), not between them and the
        ``def``."""
        now = self.anchors.get(symbol.def_line)
        return None if now is None else max(0, now - (symbol.def_line - symbol.start_line))

    def source_hash(self, qualname: str) -> str | None:
        """The engine's source_hash of the symbol (lazy: only placed functions need it)."""
        symbol = self.symbols.get(qualname)
        if symbol is None:
            return None
        if qualname not in self._hashes:
            definition = sources.Definition(
                qualname, symbol.kind, symbol.def_line + 1, symbol.start_line + 1,
                symbol.end_line + 1, (),
            )  # fmt: skip
            self._hashes[qualname] = sources.source_hash(self.text, definition)
        return self._hashes[qualname]

    def symbol_at(self, line: int) -> Symbol | None:
        """The innermost symbol whose header (decorators..def line) holds the current ``line``."""
        for symbol in self.symbols.values():
            now = self.def_line_now(symbol)
            if now is not None and now - (symbol.def_line - symbol.start_line) <= line <= now:
                return symbol
        return None


def analyse(text: str) -> Analysis:
    """Parses ``text`` (block by block: an edit re-parses its block only, see ``outline``);
    raises SyntaxError (the caller keeps the previous analysis)."""
    parsed = outline(text)
    found: dict[str, Symbol] = {}
    modules = _module_classes([d for _, d in parsed.definitions])
    bound = parsed.torch_names
    lines = text.splitlines()
    factories = set(_INPUTS_DIRECTIVE.findall(text))
    for offset, definition in parsed.definitions:
        qualname, kind = definition.qualname, definition.kind
        if kind == "class" and qualname not in modules:
            continue
        start = offset + definition.start_line
        # uses torch: a name bound to torch is read there (placement.uses_torch)
        suggested = has_directive(lines, start) or bool(bound & definition.reads)
        if qualname in factories:
            suggested = False  # an inputs factory: profiling it measures the test data
        if _generated_helper(lines, start):
            suggested = False  # the swap helper's fixed method: a method body, not a target
        found[qualname] = Symbol(
            qualname, kind, offset + definition.def_line, start, offset + definition.end_line,
            definition.column, suggested,
        )  # fmt: skip
    anchors = LineAnchors(s.def_line for s in found.values())
    spans = tuple(
        (offset + d.start_line + 1, offset + d.end_line + 1)
        for offset, d in parsed.definitions
        if d.kind != "class"
    )
    return Analysis(text, found, bool(_IMPORTS_TORCH.search(text)), anchors, modules, spans)


def _generated_helper(lines: list[str], start: int) -> bool:
    """The comment block right above line ``start`` opens with the swap helper's header."""
    index = start - 1
    while 0 <= index < len(lines) and lines[index].lstrip().startswith("#"):
        if _SWAP_HELPER.match(lines[index]):
            return True
        index -= 1
    return False


def parse_or_none(text: str) -> Analysis | None:
    """:func:`analyse`, None when the text does not parse (for a worker thread)."""
    try:
        return analyse(text)
    except (SyntaxError, ValueError):
        return None


def _module_classes(definitions: list[Definition]) -> set[str]:
    """Qualnames of classes deriving from ``nn.Module`` (directly or through a class here)."""
    classes = {d.qualname: d.bases for d in definitions if d.kind == "class"}
    found: set[str] = set()
    changed = True
    while changed:  # a fixpoint: `class B(A)` counts once `A` is known to be a Module
        changed = False
        for qualname, bases in classes.items():
            if qualname in found:
                continue
            for name in bases:
                if name == "Module" or any(q.rsplit(".", 1)[-1] == name for q in found):
                    found.add(qualname)
                    changed = True
                    break
    return found


@dataclass
class Placement:
    """One run shown on this document."""

    result: Result
    lines: dict[int, dict]  # measured 0-based line -> the result's line entry for this file
    error_line: int | None  # measured 0-based line of the raising line in this file
    anchors: LineAnchors
    # source_hash of the function's inputs factory (``# trnlens: inputs=``) when placed: the
    # run measured it too, so editing it (a quick fix on the optimizer it builds) makes the
    # run stale as editing the function does
    inputs_hash: str | None = None

    def now(self, measured: int) -> int | None:
        return self.anchors.get(measured)

    def line_total(self) -> float:
        """What shares are shares of: all attributed line time of the run (any file)."""
        total = sum(entry.get("device_us") or 0 for entry in self.result.data.get("lines", []))
        return total or (run_headline(self.result.data).time_us or 0)


@dataclass(frozen=True)
class EditMark:
    """The document's state when a run was requested: replaying later edits places its lines."""

    generation: int
    index: int


# project-relative path -> the analysis of that project file's text now (an open buffer, else
# the disk), None when it cannot be read: what a run's executed fingerprint is checked against
ProjectFiles = Callable[[str], "Analysis | None"]


class ProfiledDocument:
    def __init__(self, uri: str, path: Path, root: Path, text: str, generation: int):
        self.uri = uri
        # outside the project (site-packages, the standard library): read-only to trnlens
        self.read_only = False
        self.project_files: ProjectFiles | None = None
        self.path = path
        self.root = root
        self.relpath = _relpath(path, root)
        self.text = text
        self.generation = generation
        self.placements: dict[str, Placement] = {}
        # qualname -> earlier runs placed here, newest first: Undo brings their text back, and
        # then the run that measured that text is shown again (see restore_matching)
        self.superseded: dict[str, list[Placement]] = {}
        # qualname -> the last run stopped for want of inputs (lsp/missing_inputs.py)
        self.inputs_failures: dict[str, Any] = {}
        self._analysis: Analysis | None = None
        self._inputs_cache: tuple[str | None, dict[str, str | None]] = (None, {})
        self._analysed_text: str | None = None
        # Edits since the oldest outstanding mark: Change, or a full-text line mapping.
        self._log: list[Change | dict[int, int]] = []
        self._log_base = 0
        self._marks = 0
        # A notebook (lsp/notebooks.py): its cells' places in ``text`` (each cell's id is its
        # uri), and the notebook as JSON, which a run ships when the cells differ from the file.
        self.cells: Joined | None = None
        self.notebook_json: str | None = None
        self.saved_cells: list[tuple[str, str]] = []  # the file's (source, id), notebooks.py

    # -- text
    def analysis(self) -> Analysis | None:
        if self._analysed_text is not self.text:
            self._analysed_text = self.text
            try:
                self._analysis = analyse(self.text)
            except (SyntaxError, ValueError):
                pass  # keep the last good parse: its anchors have followed the edits
        return self._analysis

    def parsed(self) -> bool:
        """Whether the text now has been parsed (:meth:`analysis` then costs nothing)."""
        return self._analysed_text is self.text

    def adopt_parse(self, text: str, analysis: Analysis | None) -> None:
        """Takes the parse of ``text`` made in a worker thread (None: it does not parse, the
        last good parse stays), when ``text`` is still the document's."""
        if text is self.text:
            self._analysed_text = text
            if analysis is not None:
                self._analysis = analysis

    def adopt(self, analysis: Analysis) -> bool:
        """Takes a parse made elsewhere (a worker thread) when it is of the current text."""
        if analysis.text is not self.text:
            return False
        self._analysed_text, self._analysis = self.text, analysis
        return True

    def update(self, new_text: str, changes: list) -> None:
        """Applies one didChange (already applied to ``new_text``) to everything anchored."""
        edits: list[Change | dict[int, int]] = []
        ranged = [Change.from_lsp(c) for c in changes]
        if all(c is not None for c in ranged):
            edits.extend(c for c in ranged if c is not None)
        else:  # a full-text change: diff the lines instead
            edits.append(diff_map(self.text.splitlines(), new_text.splitlines()))
        self.text = new_text
        anchor_sets = [p.anchors for p in self.placements.values()]
        anchor_sets += [p.anchors for older in self.superseded.values() for p in older]
        if self._analysis is not None:
            anchor_sets.append(self._analysis.anchors)
        for edit in edits:
            for anchors in anchor_sets:
                if isinstance(edit, Change):
                    anchors.apply(edit)
                else:
                    anchors.apply_full(edit)
        if self._marks:
            self._log.extend(edits)

    # -- runs
    def mark(self) -> EditMark:
        self._marks += 1
        return EditMark(self.generation, self._log_base + len(self._log))

    def release(self, mark: EditMark) -> None:
        if mark.generation != self.generation:
            return
        self._marks = max(0, self._marks - 1)
        if not self._marks:
            self._log_base += len(self._log)
            self._log.clear()

    def place(self, result: Result, mark: EditMark | None = None) -> Placement:
        """Shows ``result`` here. With the mark taken when the run was requested, its lines are
        moved through every edit made since; without one (a stored run, or the document was
        reopened), they are shifted by how far the function's ``def`` has moved."""
        lines = {
            entry["line"] - 1: entry
            for entry in result.data.get("lines") or []
            if entry.get("path") == self.relpath and entry.get("line")
        }
        error = result.error or {}
        here = error.get("path") == self.relpath and error.get("line")
        error_line = error["line"] - 1 if here else None
        measured = set(lines) | ({error_line} if error_line is not None else set())
        measured |= compiled_lines(result, self.relpath)  # graph breaks (lsp/compiled.py)
        measured |= xla_lines(result, self.relpath)  # an XLA run's lines (lsp/xla_figures.py)
        measured |= memory_lines(result, self.relpath)  # memory growth's lines (lsp/memory.py)
        measured |= {  # measured findings' lines follow edits like the figures' lines
            f["line"] - 1
            for f in result.data.get("findings") or []
            if f.get("path") == self.relpath and f.get("line")
        }
        measured |= calling_lines(result.data, self.relpath)  # library code's callers
        measured |= {  # a multi-rank run's collectives (lsp/rank_hints.py)
            c["line"] - 1
            for c in result.data.get("collectives") or []
            if c.get("path") == self.relpath and c.get("line")
        }
        if mark is not None and mark.generation == self.generation:
            anchors = LineAnchors(measured)
            for edit in self._log[mark.index - self._log_base :]:
                anchors.apply(edit) if isinstance(edit, Change) else anchors.apply_full(edit)
        else:
            anchors = LineAnchors(measured, self._def_offset(result))
        placement = Placement(result, lines, error_line, anchors)
        placement.inputs_hash = self.inputs_hash(result.qualname)
        previous = self.placements.get(result.qualname)
        if previous is not None and previous.result.run_id != result.run_id:
            older = [previous, *self.superseded.get(result.qualname, [])]
            self.superseded[result.qualname] = older[:SUPERSEDED_KEPT]
        self.placements[result.qualname] = placement
        self.inputs_failures.pop(result.qualname, None)  # it ran: it has its inputs now
        return placement

    def clear_runs(self) -> None:
        """Forgets every run shown here, the earlier ones too (an Undo must not bring a cleared
        run back)."""
        self.placements.clear()
        self.superseded.clear()

    def _def_offset(self, result: Result) -> int:
        analysis = self.analysis()
        run_line = result.data["function"].get("line")
        symbol = analysis.symbols.get(result.qualname) if analysis else None
        if analysis is None or symbol is None or not run_line:
            return 0
        now = analysis.def_line_now(symbol)
        return 0 if now is None else now - (run_line - 1)

    def is_stale(self, placement: Placement) -> bool:
        """The function's current source differs from the measured one (or it is gone), its
        inputs factory differs from the one it had when the run was placed, or other project
        code the run executed changed (:meth:`executed_changed`)."""
        analysis = self.analysis()
        if analysis is None:
            return False
        current = analysis.source_hash(placement.result.qualname)
        if current != placement.result.data["function"].get("source_hash"):
            return True
        if self.inputs_hash(placement.result.qualname) != placement.inputs_hash:
            return True
        return self.executed_changed(placement) is not None

    def executed_changed(self, placement: Placement) -> str | None:
        """Where the project code the run executed differs now (``path`` for its code outside
        functions, ``path::qualname`` for a function), from the run's ``executed``
        fingerprint (agent/executed/fingerprint.py); None when nothing did, or the run has none
        (an older run). A file that cannot be read now is not counted."""
        executed = placement.result.data.get("executed")
        if not isinstance(executed, dict):
            return None
        for relpath, entry in executed.items():
            if not isinstance(entry, dict):
                continue
            if relpath == self.relpath:
                now = self.analysis()
            elif self.project_files is not None:
                now = self.project_files(relpath)
            else:
                continue
            if now is None:
                continue
            if entry.get("module") and now.module_hash() != entry["module"]:
                return relpath
            for qualname, recorded in (entry.get("defs") or {}).items():
                if now.source_hash(qualname) != recorded:
                    return f"{relpath}::{qualname}"
        return None

    def inputs_hash(self, qualname: str) -> str | None:
        """source_hash of the factory the function's (or its class's) directive names."""
        analysis = self.analysis()
        if analysis is None:
            return None
        if self._inputs_cache[0] is not self.text:  # hints ask once per placed line
            self._inputs_cache = (self.text, {})
        cache = self._inputs_cache[1]
        if qualname not in cache:
            cache[qualname] = self._find_inputs_hash(analysis, qualname)
        return cache[qualname]

    def _find_inputs_hash(self, analysis: Analysis, qualname: str) -> str | None:
        lines = self.text.splitlines()
        for name in (qualname, qualname.rpartition(".")[0]):
            symbol = analysis.symbols.get(name) if name else None
            start = analysis.header_line_now(symbol) if symbol else None
            index = (start or 0) - 1
            while start is not None and index >= 0 and lines[index].lstrip().startswith("#"):
                found = _INPUTS_DIRECTIVE.search(lines[index])
                if found:
                    return analysis.source_hash(found.group(1))
                index -= 1
        return None

    def restore_matching(self) -> list[Placement]:
        """Shows again an earlier run whose source matches the text (after an Undo) in place of
        a stale one; the runs that came back."""
        swapped: list[Placement] = []
        for qualname, placement in list(self.placements.items()):
            older = self.superseded.get(qualname) or []
            if not older or not self.is_stale(placement):
                continue
            match = next((p for p in older if not self.is_stale(p)), None)
            if match is not None:
                older.remove(match)
                self.superseded[qualname] = [placement, *older][:SUPERSEDED_KEPT]
                self.placements[qualname] = match
                swapped.append(match)
        return swapped

    def line_figures(self) -> Iterator[tuple[int, dict, Placement]]:
        """(current line, line entry, placement) for every measured line still in the buffer."""
        for placement in self.placements.values():
            if placement.result.error:
                continue
            for measured, entry in placement.lines.items():
                now = placement.now(measured)
                if now is not None:
                    yield now, entry, placement


def _relpath(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def compiled_lines(result: Result, relpath: str) -> set[int]:
    """0-based lines of this file where the run's torch.compile broke the graph: anchored, so
    that lsp/compiled.py's diagnostics on them follow edits."""
    data = result.data.get("compile")
    if not isinstance(data, dict):
        return set()
    return {
        b["line"] - 1
        for b in data.get("breaks") or []
        if b.get("path") == relpath and isinstance(b.get("line"), int) and b["line"] >= 1
    }


def xla_lines(result: Result, relpath: str) -> set[int]:
    """0-based lines of this file that an XLA run's section names (lsp/xla_figures.py):
    anchored, so that its hints and diagnostics follow edits."""
    x = result.data.get("xla")
    if not isinstance(x, dict):
        return set()
    rows = [*x.get("lines", []), *x.get("fallbacks", []), *x.get("forced", []),
            *x.get("recompiles", [])]  # fmt: skip
    return {
        r["line"] - 1
        for r in rows
        if r.get("path") == relpath and isinstance(r.get("line"), int) and r["line"] >= 1
    }


def memory_lines(result: Result, relpath: str) -> set[int]:
    """0-based lines of this file where the run's memory grows (lsp/memory.py): anchored, so that
    the growth diagnostics follow edits."""
    memory = memoryfigures.read(result.data)
    rows = memory.growth if memory is not None else []
    return {r.line - 1 for r in rows if r.path == relpath and r.line is not None and r.line >= 1}
