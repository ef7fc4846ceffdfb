"""Static analysis in the editor: findings as diagnostics, the Compare lens and its runs.

Findings come from :func:`trnlens.analysis.analyse_source` (pure Python, no torch), cached per
document by text and by the ``trnlens.rules.select`` / ``ignore`` settings. Opening a document
analyses it at once; while the user types, the analysis waits until the edits pause
(``DEBOUNCE_S``) and then republishes, the previous findings standing meanwhile. ``# noqa`` is
the analysis' own business.

Analysis columns count code points; LSP counts UTF-16 units: :func:`to_position` converts, on the
text the findings were computed from. After a profile (or a comparison) of the function, a
finding's message adds what its lines measured: dispatches and time per step, the time labelled
by the run's time basis (``CPU (ops)`` on the cpu backend).

A function with a fused alternative gets a ``⇄ Compare variants`` lens: one agent run of the
original, the fixed code (the finding's ``variant_source``, sent as source text) and the
``torch.compile``d original, queued like profiles (``Runs.compare``); its speed-ups, spread,
dispatches and max abs difference end the progress, are shown as a message, answer the command
and then read on the lens.
"""

from __future__ import annotations

import asyncio
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

from trnlens import memoryfigures, memoryfixes, speedup, units
from trnlens.agent.notebook.cells import cell_label
from trnlens.analysis import Finding, Location, analyse_source
from trnlens.fixvariants import NoFix, compiled_variants, fix_variants
from trnlens.headline import headline as run_headline
from trnlens.libraries.swap import swap_variants
from trnlens.lsp import compiled, format
from trnlens.lsp import measured as measured_findings
from trnlens.lsp.command_ids import CANCEL, COMPARE
from trnlens.lsp.context import Context
from trnlens.lsp.diagnostics import SOURCE
from trnlens.lsp.documents import Analysis, ProfiledDocument, analyse
from trnlens.lsp.run_findings import static_verdict
from trnlens.lsp.runs import RequestRefused, Runs
from trnlens.results import Result
from trnlens.settings import LOCAL, Settings

log = logging.getLogger(__name__)

DEBOUNCE_S = 0.15
_BREAKS = re.compile(r"\r\n|\r|\n")  # LSP's line breaks (not str.splitlines' many)


# -- positions
def split_lines(text: str) -> list[str]:
    return _BREAKS.split(text)


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def to_position(lines: list[str], location: Location) -> types.Position:
    """A 1-based (row, code-point column) as an LSP position (0-based, UTF-16 units)."""
    row = max(0, location.row - 1)
    if row >= len(lines):
        last = len(lines) - 1
        return types.Position(max(last, 0), utf16_len(lines[last]) if lines else 0)
    line = lines[row]
    return types.Position(row, utf16_len(line[: max(0, location.column - 1)]))


def to_range(lines: list[str], start: Location, end: Location) -> types.Range:
    return types.Range(to_position(lines, start), to_position(lines, end))


class RunFailed(Exception):
    """A comparison that was queued and failed; the command's answer tells the user."""

    def __init__(self, message: str, severity: str = "error"):
        super().__init__(message)
        self.severity = severity


@dataclass
class Analysed:
    """Findings of one text under one rule selection."""

    text: str
    rules: tuple[tuple[str, ...], tuple[str, ...]]
    findings: list[Finding]
    _lines: list[str] | None = None

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = split_lines(self.text)
        return self._lines

    def range(self, finding: Finding) -> types.Range:
        return to_range(self.lines, finding.location, finding.end_location)

    def position(self, location: Location) -> types.Position:
        return to_position(self.lines, location)


@dataclass
class Comparison:
    """A finished comparison of a function, as its lens reads it."""

    answer: dict
    source_hash: str | None
    created_at: str


def _fused(analysed: Analysed) -> list[str]:
    """The functions with a fused alternative (a Compare lens each), in order."""
    found = (f.qualname for f in analysed.findings if f.variant_source and f.qualname)
    return list(dict.fromkeys(found))


def _rules(settings: Settings) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(settings.rules_select), tuple(settings.rules_ignore)


def analyse_text(text: str, path: str, settings: Settings) -> Analysed:
    select, ignore = _rules(settings)
    findings = analyse_source(text, path, select or None, ignore or None)
    return Analysed(text, (select, ignore), findings)


class AnalysisService:
    def __init__(self, ctx: Context, runs: Runs):
        self.ctx = ctx
        self.runs = runs
        self._cache: dict[str, Analysed] = {}
        self._pending: dict[str, asyncio.TimerHandle] = {}
        self._running: set[str] = set()  # documents analysed in a worker thread now
        self._again: set[str] = set()  # ... and asked for again meanwhile
        self._tasks: set[asyncio.Task] = set()
        # One thread: analyses end (and publish) in the order they were asked for.
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="analysis")
        self.comparisons: dict[tuple[str, str], Comparison] = {}

    # -- findings
    def current(self, doc: ProfiledDocument, settings: Settings | None = None) -> Analysed:
        """The findings of the document's text now (analysed here if they are not cached)."""
        settings = settings or self.ctx.config.settings_for(doc.root)
        cached = self._cache.get(doc.uri)
        if cached is not None and cached.rules == _rules(settings) and cached.text == doc.text:
            return cached
        analysed = analyse_text(doc.text, doc.relpath, settings)
        self._cache[doc.uri] = analysed
        return analysed

    @staticmethod
    def prepare(text: str, path: str, settings: Settings) -> tuple[Analysis | None, Analysed]:
        """The parse (None: the text does not parse) and the findings of a text, for
        :meth:`adopt`: pure, for a worker thread (a document just opened: a big file's first
        analysis takes seconds)."""
        try:
            structure: Analysis | None = analyse(text)
        except (SyntaxError, ValueError):  # the findings say where; the document has no parse
            structure = None
        return structure, analyse_text(text, path, settings)

    def adopt(self, doc: ProfiledDocument, prepared: tuple[Analysis | None, Analysed]) -> None:
        """Keeps what :meth:`prepare` found, when it is of the document's current text."""
        structure, analysed = prepared
        if structure is not None:
            doc.adopt(structure)
        if analysed.text == doc.text:
            self._cache[doc.uri] = analysed

    async def analysed(self, doc: ProfiledDocument) -> Analysed:
        """The findings of the document's text now, analysed in a worker thread if they are
        not cached (for requests that need them exact: a quick fix edits by their positions)."""
        settings = self.ctx.config.settings_for(doc.root)
        cached = self._cache.get(doc.uri)
        if cached is not None and cached.rules == _rules(settings) and cached.text == doc.text:
            return cached
        text = doc.text
        analysed = await asyncio.to_thread(analyse_text, text, doc.relpath, settings)
        if doc.text is text and self.ctx.documents.get(doc.uri) is doc:
            self._cache[doc.uri] = analysed
        return analysed

    def provider(self, doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
        """The diagnostics hub's provider. On the loop it never analyses: the document's open
        analysed it in a worker thread; after edits (once they pause) and settings changes (at
        once) a worker thread analyses again, the previous findings standing meanwhile, and
        publishes (a 50,000-line file's analysis is seconds of CPU). None in a file outside the
        project: the user cannot fix them there, and what a run measured there comes once per
        finding from lsp/library.py."""
        if doc.read_only:
            return []
        cached = self._cache.get(doc.uri)
        if cached is None or cached.rules != _rules(settings) or cached.text != doc.text:
            delay = DEBOUNCE_S if cached is not None and cached.rules == _rules(settings) else 0
            if doc.uri in self._pending or doc.uri in self._running:
                analysed = cached or Analysed(doc.text, _rules(settings), [])  # asked already
            elif self._debounce(doc.uri, delay):
                analysed = cached or Analysed(doc.text, _rules(settings), [])
            else:  # no loop (a unit test): analyse now
                analysed = self.current(doc, settings)
        else:
            analysed = cached
        return [self.diagnostic(doc, analysed, f, settings) for f in analysed.findings]

    def edited(self, uri: str) -> None:
        """An edit: the document is analysed once edits pause. Scheduled as the edit comes
        (not once its parse is in), so that analyses run in the order of the edits."""
        self._debounce(uri)

    def _debounce(self, uri: str, delay: float = DEBOUNCE_S) -> bool:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False  # no loop (a unit test): analyse now
        handle = self._pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        self._pending[uri] = loop.call_later(delay, self._settled, uri)
        return True

    def _settled(self, uri: str) -> None:
        self._pending.pop(uri, None)
        if uri in self._running:  # one analysis of a document at a time: the next follows it
            self._again.add(uri)
            return
        doc = self.ctx.documents.get(uri)
        if doc is None:
            return
        self._running.add(uri)
        task = asyncio.get_running_loop().create_task(self._analyse(doc))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _analyse(self, doc: ProfiledDocument) -> None:
        uri = doc.uri
        try:
            before = self._cache.get(uri)
            settings = self.ctx.config.settings_for(doc.root)
            now = await asyncio.get_running_loop().run_in_executor(
                self._worker, analyse_text, doc.text, doc.relpath, settings
            )
            if self.ctx.documents.get(uri) is not doc:
                return
            self._cache[uri] = now  # of a text at most as old as the edits: better than before
            self.ctx.publish(uri)  # (a newer text asks again, DEBOUNCE_S after its edit)
            if before is None or _fused(before) != _fused(now):
                self.ctx.refresh_lenses()  # a Compare lens comes or goes with the findings
        except Exception:
            log.exception("analysing %s failed", uri)
        finally:
            self._running.discard(uri)
            if uri in self._again:
                self._again.discard(uri)
                self._debounce(uri, 0)

    def forget(self, uri: str) -> None:
        self._cache.pop(uri, None)
        handle = self._pending.pop(uri, None)
        if handle is not None:
            handle.cancel()

    def close(self) -> None:
        """At shutdown: no debounced analysis may publish once the client has gone (pygls then
        reports the closed pipe by trying to send again, a second of CPU on the loop)."""
        for handle in self._pending.values():
            handle.cancel()
        self._pending.clear()
        self._worker.shutdown(wait=False, cancel_futures=True)

    def forget_comparisons(self, uri: str | None = None) -> None:
        """Forgets the finished comparisons of one document, or of every document."""
        for key in [k for k in self.comparisons if uri is None or k[0] == uri]:
            del self.comparisons[key]

    def compared(self, uri: str) -> dict[str, dict]:
        """The document's finished comparisons' answers, by qualname (for its hovers)."""
        return {q: c.answer for (u, q), c in self.comparisons.items() if u == uri}

    def diagnostic(
        self,
        doc: ProfiledDocument,
        analysed: Analysed,
        finding: Finding,
        settings: Settings | None = None,
    ) -> types.Diagnostic:
        severity, text = finding.severity, None
        found = measurement(doc, finding)
        if found is not None:
            text, share = found
            settings = settings or self.ctx.config.settings_for(doc.root)
            severity = measured_findings.severity(finding, share, settings.hotspot_threshold)
        message = measured_findings.message(finding, text)
        verdict = compiled.static_verdict(doc, finding)  # a graph-break hint after a compiled run
        if verdict:
            message = f"{message.removesuffix(measured_findings.NOT_TIMED)}\n{verdict}"
        return types.Diagnostic(
            range=analysed.range(finding),
            message=message,
            severity=measured_findings.lsp_severity(severity),
            source=SOURCE,
            code=finding.code,
            data={"qualname": finding.qualname, "fixable": finding.fix is not None},
        )

    # -- the Compare lens
    def lenses(self, doc: ProfiledDocument, target: str) -> list[types.CodeLens]:
        structure = doc.analysis()
        if structure is None or doc.read_only:
            return []
        analysed = self._cache.get(doc.uri)
        if analysed is None:  # being analysed off the loop: lenses are refreshed once done
            return []
        found = []  # while typing: the findings of the text before, until it pauses
        fused = _fused(analysed)
        # every profiled function: as written vs compiled, when the analysis has no fix there
        profiled = [q for q in doc.placements if q not in fused and not q.startswith("<")]
        for qualname in fused + profiled:
            symbol = structure.symbols.get(qualname)
            line = structure.header_line_now(symbol) if symbol else None
            if symbol is None or line is None:
                continue
            position = types.Position(line, symbol.def_column)
            arguments: dict[str, Any] = {"uri": doc.uri, "qualname": qualname}
            state = self.runs.job_state(doc.uri, qualname, kind="compare")
            if state is not None:
                command = types.Command(
                    title=f"■ comparing: {state} · click to cancel",
                    command=CANCEL,
                    arguments=[arguments],
                )
            else:
                if target != LOCAL:
                    arguments["target"] = target
                title = self._lens_title(doc, qualname, qualname in fused)
                command = types.Command(title=title, command=COMPARE, arguments=[arguments])
            found.append(types.CodeLens(types.Range(position, position), command))
        return found

    def _lens_title(self, doc: ProfiledDocument, qualname: str, fixable: bool = True) -> str:
        title = "⇄ Compare variants"
        done = self.comparisons.get((doc.uri, qualname))
        if done is None:
            # without a fix, what the click measures: the function against its compiled self
            return title if fixable else "⇄ Compare with torch.compile"
        parts = [title]
        structure = doc.analysis()
        if structure is not None and structure.source_hash(qualname) != done.source_hash:
            parts.append("stale")
        parts.append(done.answer["lens"])
        parts.append(format.age(done.created_at))
        return " · ".join(parts)

    # -- comparisons (trnlens.server.compare / measureFix)
    async def compare(
        self,
        uri: str,
        qualname: str,
        target: str | None = None,
        code: str | None = None,
        compiled_only: bool = False,
    ) -> dict:
        """Runs original, fixed and compiled; answers once the run is over. ``compiled_only``
        (the Compare command): without a fix, original and compiled instead of a refusal."""
        doc = self.ctx.documents.get(uri)
        if doc is not None:
            await self.analysed(doc)  # off the loop: make_variants then reads the cache

        def make_variants(path) -> list[dict]:
            doc = self.ctx.documents.get(uri)
            if code == memoryfixes.CHECKPOINT_CODE:  # memory against time (memoryfixes.py)
                placement = doc.placements.get(qualname) if doc is not None else None
                try:
                    return memoryfixes.checkpoint_variants(
                        str(path), qualname, placement.result.data if placement else None
                    )
                except NoFix as exc:
                    raise RequestRefused(f"{exc}: profile {qualname} first") from None
            if doc is not None:
                findings = self.current(doc).findings
            else:
                root, relpath = self.ctx.root_and_relpath(path)
                try:
                    text = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    raise RequestRefused(f"cannot read {path}: {exc}") from None
                settings = self.ctx.config.settings_for(root)
                findings = analyse_text(text, relpath, settings).findings
            try:
                return fix_variants(str(path), qualname, findings, code)
            except NoFix as exc:
                # The library code the function's placed run executed may have a fix: a module
                # swap (libraries/swap.py), as trnlens compare --fix does.
                placement = doc.placements.get(qualname) if doc is not None else None
                run = placement.result.data if placement is not None else None
                try:
                    return swap_variants(str(path), qualname, run)
                except NoFix:
                    if not compiled_only:  # Measure the fix, where there is none
                        raise RequestRefused(str(exc)) from None
                # No fix: the function as written against its torch.compile'd self, which
                # every function can be compared with.
                return compiled_variants(str(path), qualname)

        job, new = await self.runs.compare(
            uri, qualname, make_variants, self._compared, target, title=f"Compare {qualname}"
        )
        try:
            answer = await asyncio.shield(job.context["done"])
        except RequestRefused as exc:  # the run failed (runs._fail): the answer says so
            raise RunFailed(str(exc), getattr(exc, "severity", "error")) from None
        return {**answer, "alreadyPending": not new}

    def _compared(self, job, outcome: dict, mark) -> dict:
        answer = summarize(job.qualname, outcome)
        base = outcome["variants"][0]
        doc = self.ctx.documents.get(job.uri)
        if doc is not None and not base.get("error"):
            doc.place(Result.parse(base), mark)  # the baseline is a profile of the function
        self.comparisons[(job.uri, job.qualname)] = Comparison(
            answer, base["function"].get("source_hash"), base["created_at"]
        )
        return answer


def measurement(doc: ProfiledDocument, finding: Finding) -> tuple[str, float] | None:
    """'measured: 6 dispatches, 41.2 µs CPU (ops) per step on lines 14–15 (rmsnorm_naive, just
    now)' from the placed run of the finding's function (else any run that measured them), and
    the share of that run's line time the finding's lines took."""
    if not finding.lines:
        return None
    first, last = finding.lines[0] - 1, finding.lines[1] - 1
    placements = sorted(
        doc.placements.values(), key=lambda p: p.result.qualname != finding.qualname
    )
    for placement in placements:
        result = placement.result
        if result.error:
            continue
        dispatches, time_us, hit, cell = 0.0, 0.0, False, None
        for measured, entry in placement.lines.items():
            now = placement.now(measured)
            if now is not None and first <= now <= last:
                hit = True
                dispatches += entry.get("dispatches") or 0
                time_us += entry.get("device_us") or 0
                cell = cell or _in_cell(entry, now)
        if not hit:
            continue
        # in a notebook the lines as the cell numbers them, as the hover says them (issue 42)
        shift, where = cell or (0, "")
        a, b = first + 1 + shift, last + 1 + shift
        span = (f"line {a}" if a == b else f"lines {a}–{b}") + where
        text = (
            f"measured: {format.count(dispatches, 'dispatch')}, {format.duration(time_us)} "
            f"{result.part_label} per step on {span} "
            f"({result.qualname}, {format.age(result.data['created_at'])})"
        )
        if doc.is_stale(placement):
            text += " · stale: the function changed since"
        verdict = static_verdict(doc, finding.code, first, last, dispatches)
        if verdict:
            text += f" · {verdict}"
        total = placement.line_total()
        return text, (time_us / total if total > 0 else 0.0)
    return None


def _in_cell(entry: dict, now: int) -> tuple[int, str] | None:
    """For a notebook run's line (``cell`` set by the report's views): how far the cell's own
    line number is from the joined text's (0-based ``now``), and `` (cell 3)``."""
    cell = entry.get("cell")
    if not isinstance(cell, dict) or not isinstance(cell.get("line"), int):
        return None
    return cell["line"] - (now + 1), f" ({cell_label(cell['index'])})"


def _short(variant: dict) -> str:
    info = variant.get("variant") or {}
    kind = info.get("kind")
    if kind in ("source", "swap"):  # "fixed TRN001", "fixed TRN001 in LlamaRMSNorm"
        label = info.get("label") or ""
        inner = label[label.rfind("(") + 1 : -1] if label.endswith(")") else "fixed"
        return inner.replace(": ", " ")  # "fixed TRN001"
    return "compiled" if kind == "compiled" else "original"


def _peak(variant: dict) -> int | None:
    memory = memoryfigures.read(variant)
    return memory.peak_bytes if memory is not None else None


def _peak_change(base: int | None, peak: int | None) -> str | None:
    """``−55%``: a variant's peak against the baseline's (None when either is unmeasured)."""
    if base is None or peak is None or base <= 0:
        return None
    return units.signed_pct(100 * (peak / base - 1))


def _speed(value: float | None) -> str:
    return f"{value:.2f}×" if value else "–"


def summarize(qualname: str, outcome: dict) -> dict:
    """The comparison as the command answers it: per-variant figures, a message and lens text."""
    variants = outcome["variants"]
    count = len(variants)
    speedups = outcome.get("speedups") or [None] * count
    ranges = outcome.get("speedup_ranges") or [None] * count
    diffs = outcome.get("max_abs_diff") or [None] * count
    not_comparable = outcome.get("outputs_not_comparable")
    base = Result(variants[0])
    peaks = [_peak(v) for v in variants]  # each variant's memory peak: a fix measured in bytes
    rows, parts, lens = [], [], []
    for i, variant in enumerate(variants):
        error = variant.get("error")
        row = {
            "label": (variant.get("variant") or {}).get("label") or qualname,
            "kind": (variant.get("variant") or {}).get("kind"),
            "runId": variant.get("run_id"),
            "dispatches": variant.get("dispatches_per_step"),
            "timePerStepUs": variant.get("device_time_per_step_us"),
            "medianUs": (variant.get("timing") or {}).get("median_us"),
            "headline": run_headline(variant).text,  # the figure every surface shows
            "speedup": speedups[i],
            "speedupRange": ranges[i],
            "verdict": speedup.verdict(speedups[i], ranges[i], "×") if i else "baseline",
            "noisy": speedup.noisy(variant),
            "maxAbsDiff": diffs[i],
            "peakMemoryBytes": peaks[i],
            "error": error.get("message") if error else None,
        }
        rows.append(row)
        name = _short(variant)
        if error:
            parts.append(f"{name} failed: {row['error']}")
            lens.append(f"{name.split()[0]} failed")
            continue
        text = f"{name} {format.count(row['dispatches'], 'dispatch')}"
        change = _peak_change(peaks[0], peaks[i]) if i else None
        if i == 0:
            text += f", {row['headline']}/step"
            text += f", peak {units.data_size(peaks[0])}" if peaks[0] is not None else ""
        else:
            span = ranges[i]
            spread = f" ({speedup.span_text(span, '×', '–')})" if span else ""
            text += f", {row['verdict']}{spread}"
            if not_comparable:
                text += ", outputs not comparable"
            elif diffs[i] is not None:
                text += f", max |diff| {diffs[i]:.1e}"
            if change is not None:
                text += f", peak {units.data_size(peaks[i])} ({change})"
            if speedup.measurable(speedups[i], ranges[i]):
                lens.append(f"{name.split()[0]} {_speed(speedups[i])}")
            else:
                lens.append(f"{name.split()[0]}: {speedup.SAME}")
            if change is not None and change != "±0%":
                lens[-1] += f", peak {change}"
        parts.append(text)
    dispatches = "/".join("–" if r["dispatches"] is None else f"{r['dispatches']:g}" for r in rows)
    lens.append(f"{dispatches} dispatches")
    if any(row["noisy"] for row in rows):
        lens.append("noisy")
    message = f"compared {qualname}: " + "; ".join(parts)
    message += f" ({speedup.METHOD}; the range in brackets)"
    if not_comparable:
        message += f"; {not_comparable}"
    return {
        "qualname": qualname,
        "backend": base.data.get("backend"),
        "device": base.data.get("device"),
        "timeBasis": base.data.get("time_basis"),
        "variants": rows,
        "speedups": speedups,
        "speedupRanges": ranges,
        "maxAbsDiff": diffs,
        "warnings": speedup.variant_warnings(variants, outcome.get("warnings") or []),
        "outputsNotComparable": not_comparable,
        "message": message,
        "lens": " · ".join(lens),
    }
