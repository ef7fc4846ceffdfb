"""Keeping what the editor shows true to the disk and to time: watching, history, regressions.

- One :class:`~trnlens.watch.WorkspaceWatcher` per project root (``trnlens.watch.enabled``).
  Python files changed on disk that are **not open** are re-analysed in the watcher's thread
  (``trnlens.analysis.analyse_source``, with ``trnlens.rules.select``/``ignore``) and their
  diagnostics published; a closed file that goes away has its diagnostics cleared (an opened
  file's diagnostics are the providers' again, from the buffer). Open documents follow the
  buffer, never the disk. The runs of a changed closed file are re-checked against its source
  hashes and the client hears ``trnlens/staleChanged`` ``{uri, path, stale, fresh}`` when that
  set changes.
- Runs stored by another process (a CLI run, a sync) are picked up: new store rows (and
  ``artifacts/<run-id>/result.json`` without a row, which is adopted) are placed on open documents,
  then lenses and hints are refreshed and diagnostics republished, without a restart.
- History on the lens: ``−42% vs previous`` (or ``vs REF`` with ``trnlens.baselineRef``), and a
  Warning ``regression`` diagnostic on the ``def`` line when the slowdown exceeds both
  ``trnlens.regressionThreshold`` and the two runs' measured spread (:mod:`trnlens.history`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path

from trnlens import history
from trnlens.lsp import format
from trnlens.lsp.context import Context
from trnlens.lsp.documents import ProfiledDocument
from trnlens.lsp.run_history import change_in_thread, file_hashes, history_answer
from trnlens.lsp.runs import Runs
from trnlens.lsp.stored import latest_profile
from trnlens.results import Result, SchemaMismatch
from trnlens.settings import Settings
from trnlens.store import Store, StoreError
from trnlens.watch import Batch, WorkspaceWatcher

log = logging.getLogger(__name__)
# What the watcher's thread read of new runs: the store's new rows, and the latest profile of
# each of their functions, parsed (None: none, or not readable).
NewRuns = tuple[list[tuple[int, str, str, str]], dict[tuple[str, str], Result | None]]

STALE_CHANGED = "trnlens/staleChanged"
HISTORY_WORKERS = 2  # git processes at once for lens histories
# How long a finished run's lens waits for its "vs previous" before it is drawn without it (a
# local store answers in milliseconds; git for a baseline ref can take longer)
CHANGE_WAIT_S = 2.0
MAX_FILE_BYTES = 2_000_000  # larger "Python" files (generated data) are not analysed


def analysis_diagnostics(doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
    """Static analysis of a closed file (pure: runs in the watcher's thread)."""
    from trnlens.analysis import analyse_source
    from trnlens.lsp.measured import lsp_severity

    found = []
    findings = analyse_source(
        doc.text, str(doc.path), settings.rules_select or None, settings.rules_ignore or None
    )
    for finding in findings:
        r = finding.lsp_range()
        found.append(
            types.Diagnostic(
                range=types.Range(
                    types.Position(r["start"]["line"], r["start"]["character"]),
                    types.Position(r["end"]["line"], r["end"]["character"]),
                ),
                message=finding.message,
                severity=lsp_severity(finding.severity),
                source="trnlens",
                code=finding.code,
            )
        )
    return found


def change_label(found: history.Change, against: str) -> str:
    """The lens's words for a change against the baseline: its figure (the headline the lens
    shows, history.figure), and what the noise test said of it in words that never contradict
    that figure: ``−42% vs previous``, ``+35% vs main (regression)``; ``no change vs previous
    (+4%, within noise)`` (under the threshold and within the runs' spread) or ``(+8%, under
    the 10% threshold)``; ``+60% vs previous (within noise)`` (over the threshold, within two
    reliable runs' spread: never called "no change"); ``+768% vs previous (unreliable: the
    machine was busy)`` (a run whose timing cannot be trusted: its spread proves nothing). A
    change in the dispatches is always said after it, whatever the time's noise."""
    pct = history.percent(found.ratio)
    dispatched = history.dispatch_text(found.to_json())
    verdict = found.verdict
    if verdict == "no change" and found.under_threshold:
        what = "no change in time" if dispatched else "no change"
        why = (
            "within noise"
            if found.within_noise
            else f"under the {100 * found.threshold:g}% threshold"
        )
        label = f"{what} vs {against} ({pct}, {why})"
    elif verdict == "no change":
        label = f"{pct} vs {against} (within noise)"
    elif verdict == "noisy":
        label = f"{pct} vs {against} (unreliable: {found.unreliable_why(against)})"
    else:
        label = f"{pct} vs {against}" + (" (regression)" if verdict == "regression" else "")
    return f"{label} · {dispatched}" if dispatched else label


class Watching:
    def __init__(self, ctx: Context, runs: Runs):
        self.ctx = ctx
        self.runs = runs
        self.loop: asyncio.AbstractEventLoop | None = None
        self.watchers: dict[Path, WorkspaceWatcher] = {}
        self.closed: set[str] = set()  # closed files' uris with diagnostics published by us
        self.stale: dict[str, frozenset[str]] = {}  # closed file uri -> its stale qualnames
        self.cursors: dict[Path, int] = {}  # root -> last store rowid seen
        self._changes: dict[tuple, history.Change | None] = {}
        # Changes being worked out off the loop (git log --follow, git rev-list, the store's
        # lineage queries: seconds in a large repository), by the key of _changes.
        self._pending: set[tuple] = set()
        self._working: dict[tuple, asyncio.Task] = {}  # the pending ones' tasks
        self._generation = 0  # bumped when _changes is cleared: late answers are dropped
        self._tasks: set[asyncio.Task] = set()
        self._history_pool = ThreadPoolExecutor(HISTORY_WORKERS, thread_name_prefix="history")

    # -- life cycle
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        for root in self.ctx.roots():
            self.watch(root)

    def watch(self, root: Path) -> None:
        if self.loop is None or root in self.watchers:
            return
        if not self.ctx.config.settings_for(root).watch_enabled or not root.is_dir():
            return
        store = self.ctx.store(root)
        self.cursors[root] = store.last_rowid() if store else 0
        watcher = self.watchers[root] = WorkspaceWatcher(root, lambda b: self._from_thread(root, b))
        # watchdog's start walks the whole tree to add a watch per folder: 0.3-0.6 s of CPU on
        # the loop when a library file's root was a project with its .venv (issue 30)
        task = self.loop.create_task(self._start(root, watcher))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _start(self, root: Path, watcher: WorkspaceWatcher) -> None:
        try:
            await asyncio.to_thread(watcher.start)
        except Exception:
            log.exception("cannot watch %s", root)
            if self.watchers.get(root) is watcher:
                del self.watchers[root]

    def stop(self) -> None:
        for watcher in self.watchers.values():
            watcher.stop()
        self.watchers.clear()
        for task in self._tasks:
            task.cancel()
        self._history_pool.shutdown(wait=False, cancel_futures=True)

    # -- the watcher's thread: read and analyse closed files
    def _from_thread(self, root: Path, batch: Batch) -> None:
        if self.loop is None or self.loop.is_closed():
            return
        paths = list(batch.changed)
        if batch.rescan:
            paths.extend(self.watchers[root].walk(since=batch.since) if root in self.watchers
                         else [])  # fmt: skip
        settings = self.ctx.config.settings_for(root)
        for path in paths:
            prepared = self._prepare(root, path, settings)
            if prepared is not None:
                self.loop.call_soon_threadsafe(self._apply_file, root, *prepared)
        picked = None
        if batch.results or batch.store_changed:
            picked = self._read_new_runs(root, batch.results)
        self.loop.call_soon_threadsafe(self._apply_batch, root, batch, picked)

    def _read_new_runs(self, root: Path, run_ids: set[str]) -> NewRuns | None:
        """The watcher's thread: runs stored since we last looked (by any process), read and
        parsed here, on this thread's own store connection (a real run's result is 0.1-1 MB of
        JSON: 55 ms of the loop on a cold machine, issue 30). None: no store there."""
        if not (root / ".trnlens" / "runs.sqlite").exists():
            return None
        try:
            with Store(root) as store:
                for run_id in sorted(run_ids):
                    store.adopt(run_id)
                rows = store.rows_after(self.cursors.get(root, 0))
                latest: dict[tuple[str, str], Result | None] = {}
                for _, _, path, qualname in rows:
                    if (path, qualname) in latest:
                        continue
                    found = latest_profile(store, path, qualname)  # not a comparison's variant
                    latest[(path, qualname)] = None
                    if found is None:
                        continue
                    try:
                        latest[(path, qualname)] = Result.parse(found)
                    except SchemaMismatch as exc:
                        log.warning("ignoring run %s: %s", found.get("run_id"), exc)
        except (StoreError, OSError):
            log.exception("watch: cannot read the runs of %s", root)
            return None
        return rows, latest

    def _prepare(self, root: Path, path: Path, settings: Settings):
        uri = from_fs_path(str(path))
        if uri is None or uri in self.ctx.documents:
            return None  # open: the buffer wins
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                return None
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        doc = ProfiledDocument(uri, path, root, text, 0)
        try:
            found = analysis_diagnostics(doc, settings)
        except Exception:
            log.exception("analysis of %s failed", path)
            found = []
        return uri, doc.relpath, found, file_hashes(text)

    # -- the server's loop: publish, stale, new runs
    def _apply_file(self, root: Path, uri: str, relpath: str, found: list, hashes: dict) -> None:
        if uri in self.ctx.documents:
            return  # opened meanwhile
        if found or uri in self.closed:
            self.ctx.client.publish_diagnostics(uri, found)
        if found:
            self.closed.add(uri)
        else:
            self.closed.discard(uri)
        self._recheck(root, uri, relpath, hashes)

    def _recheck(self, root: Path, uri: str, relpath: str, hashes: dict[str, str] | None) -> None:
        """Compares the file's runs with its current source (None: the file is gone)."""
        store = self.ctx.store(root)
        if store is None:
            return
        identities = [q for p, q in store.identities(relpath)]
        if not identities and uri not in self.stale:
            return
        stale, fresh = set(), set()
        for qualname in identities:
            latest = store.latest(relpath, qualname)
            measured = (latest or {}).get("function", {}).get("source_hash")
            if hashes is None or hashes.get(qualname) != measured:
                stale.add(qualname)
            else:
                fresh.add(qualname)
        before = self.stale.get(uri)
        self.stale[uri] = frozenset(stale)
        if before != self.stale[uri]:
            self.ctx.client.notify(
                STALE_CHANGED,
                {"uri": uri, "path": relpath, "stale": sorted(stale), "fresh": sorted(fresh)},
            )

    def _apply_batch(self, root: Path, batch: Batch, picked: NewRuns | None = None) -> None:
        try:
            self._apply_deleted(root, batch.deleted)
            if picked is not None:
                self._place_new_runs(root, *picked)
        except Exception:
            log.exception("applying a watch batch on %s failed", root)

    def _apply_deleted(self, root: Path, deleted: set[Path]) -> None:
        if not deleted:
            return
        gone = [str(p) for p in deleted]
        for uri in list(self.closed | set(self.stale)):
            if uri in self.ctx.documents:
                continue
            path = self.ctx.path_of(uri)
            text = str(path)
            if not any(text == g or text.startswith(g.rstrip("/") + "/") for g in gone):
                continue
            if path.exists():
                continue  # came back (a rename onto itself, a checkout)
            if uri in self.closed:
                self.closed.discard(uri)
                self.ctx.client.publish_diagnostics(uri, [])
        for g in gone:
            path = Path(g)
            if path.name.endswith((".py", ".pyi")) and not path.exists():
                uri = from_fs_path(g)
                if uri and uri not in self.ctx.documents:
                    self._recheck(root, uri, self.ctx.root_and_relpath(path)[1], None)

    def pick_up_runs(self, root: Path, run_ids: frozenset[str] | set[str] = frozenset()) -> int:
        """Places runs stored since we last looked (by any process) on open documents."""
        picked = self._read_new_runs(root, set(run_ids))
        return self._place_new_runs(root, *picked) if picked is not None else 0

    def _place_new_runs(
        self, root: Path, rows: list[tuple[int, str, str, str]], latest: dict
    ) -> int:
        """On the loop: places what :meth:`_read_new_runs` read on the open documents."""
        rows = [row for row in rows if row[0] > self.cursors.get(root, 0)]
        if not rows:
            return 0
        self.cursors[root] = rows[-1][0]
        self._forget_changes()  # baselines may have changed
        touched = set()
        newest = {(path, qualname) for _, _, path, qualname in rows}
        for doc in list(self.ctx.documents.values()):
            if doc.root.resolve() != root.resolve():
                continue
            for path, qualname in newest:
                if path != doc.relpath or self.runs.job_state(doc.uri, qualname):
                    continue  # another file, or our own run still being placed by its job
                found = latest.get((path, qualname))
                placed = doc.placements.get(qualname)
                if found is None or (placed and placed.result.run_id == found.run_id):
                    continue
                doc.place(found)
                touched.add(doc.uri)
        if touched:
            self.ctx.refresh_lenses()
            self.ctx.refresh_hints()
            for uri in touched:
                self.ctx.publish(uri, force=True)
        return len(rows)

    # -- history on lenses and diagnostics
    def change_for(self, doc: ProfiledDocument, result: Result) -> history.Change | None:
        """The run's change against its baseline, once known; None until then (it is worked
        out in a thread, and lenses and diagnostics are refreshed when it is ready) and when
        there is no baseline."""
        settings = self.ctx.config.settings_for(doc.root)
        key = self._key(doc, result)
        if key in self._changes:
            return self._changes[key]
        if result.error or self.ctx.store(doc.root) is None:
            self._changes[key] = None
            return None
        if key not in self._pending and self.loop is not None:
            self._pending.add(key)
            work = self._work_out(key, doc.root, result.data, settings, self._generation)
            task = self.loop.create_task(work)
            self._tasks.add(task)
            self._working[key] = task
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(lambda _: self._working.pop(key, None))
        return None

    def _key(self, doc: ProfiledDocument, result: Result) -> tuple:
        settings = self.ctx.config.settings_for(doc.root)
        return (result.run_id, settings.baseline_ref, settings.regression_threshold)

    async def settle_change(self, doc: ProfiledDocument, result: Result) -> None:
        """Works out a new run's change against its baseline before its lens is first drawn:
        drawn at once and again when the history came in, the lens changed its words within a
        second (issue 33). Bounded by ``CHANGE_WAIT_S``: a slow history (a big store, a busy
        machine) is drawn once ready, as before."""
        self.change_for(doc, result)
        task = self._working.get(self._key(doc, result))
        waits = [task] if task is not None else []
        # The project files the run executed, parsed now in a worker thread: staleness checks
        # them on the loop (Context.project_analysis, cached by mtime), where the first parse of
        # a big closed file would stall it.
        executed = result.data.get("executed")
        if isinstance(executed, dict) and executed:
            files = [relpath for relpath in executed if isinstance(relpath, str)]
            warm = asyncio.ensure_future(asyncio.to_thread(self._parse_executed, doc, files))
            waits.append(warm)
        if waits:
            await asyncio.wait(waits, timeout=CHANGE_WAIT_S)

    def _parse_executed(self, doc: ProfiledDocument, files: list[str]) -> None:
        for relpath in files:
            if relpath != doc.relpath:
                try:
                    self.ctx.project_analysis(doc.root, relpath)
                except Exception:  # a warm-up only: the loop's own call says what is wrong
                    log.exception("parsing %s failed", relpath)

    async def _work_out(
        self, key: tuple, root: Path, run: dict, settings: Settings, generation: int
    ) -> None:
        args = (root, run, settings.baseline_ref or None, settings.regression_threshold)
        try:
            found = await asyncio.get_running_loop().run_in_executor(
                self._history_pool, change_in_thread, *args
            )
        except Exception:
            log.exception("history of %s failed", run["function"].get("qualname"))
            found = None
        finally:
            self._pending.discard(key)
        if generation != self._generation:
            return  # new runs arrived meanwhile: the next lens or diagnostic asks again
        if len(self._changes) > 2000:
            self._changes.clear()
        self._changes[key] = found
        if found is None:
            return  # nothing to show: lenses and diagnostics already say nothing
        self.ctx.refresh_lenses()
        for uri, doc in list(self.ctx.documents.items()):
            if doc.root == root:
                self.ctx.publish(uri)

    def _forget_changes(self) -> None:
        self._changes.clear()
        self._pending.clear()
        self._generation += 1

    def lens_label(self, doc: ProfiledDocument, result: Result) -> str | None:
        """``−42% vs previous`` (``vs main`` against a baseline ref); None without a baseline."""
        try:
            found = self.change_for(doc, result)
        except Exception:
            log.exception("history of %s failed", result.identity)
            return None
        if found is None:
            return None
        ref = self.ctx.config.settings_for(doc.root).baseline_ref
        return change_label(found, ref or "previous")

    def regressions(self, doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
        """Warning on the def line of each placed run that regressed against its baseline."""
        analysis = doc.analysis()
        if analysis is None:
            return []
        found = []
        for qualname, placement in doc.placements.items():
            change = self.change_for(doc, placement.result)
            symbol = analysis.symbols.get(qualname)
            if change is None or not change.regression or symbol is None:
                continue
            line = analysis.def_line_now(symbol)
            if line is None:
                continue
            ref = settings.baseline_ref
            against = f"the run at {ref}" if ref else "the previous comparable run"
            basis = "unprofiled median" if change.run_figure.basis == "timing" else "device time"
            message = (
                f"{qualname} is {history.percent(change.ratio)} slower than {against}: "
                f"{basis} {format.duration(change.base_figure.median_us)} → "
                f"{format.duration(change.run_figure.median_us)}, beyond the "
                f"{100 * settings.regression_threshold:g}% threshold and each run's spread "
                f"({format.duration(change.spread_us)})"
                f"\nbaseline {change.base['run_id']} ({format.age(change.base['created_at'])})"
            )
            if doc.is_stale(placement):
                message += "\n(stale: the function changed since this run)"
            column = symbol.def_column
            found.append(
                types.Diagnostic(
                    range=types.Range(
                        types.Position(line, column), types.Position(line, column + 3)
                    ),
                    message=message,
                    severity=types.DiagnosticSeverity.Warning,
                    source="trnlens",
                    code="regression",
                )
            )
        return found

    async def history(self, uri: str, qualname: str) -> dict[str, Any]:
        """``trnlens.server.history {uri, qualname}``: the function's runs (renames included),
        each with its change against the previous comparable run; and whether it is stale.
        The lineage (git, the store, files on disk) is worked out in a thread."""
        path = self.ctx.path_of(uri)
        doc = self.ctx.documents.get(uri)
        root, relpath = (doc.root, doc.relpath) if doc else self.ctx.root_and_relpath(path)
        current: str | None = None  # an open document's; else read from disk in the thread
        analysis = doc.analysis() if doc is not None else None
        from_buffer = analysis is not None
        if analysis is not None:
            current = analysis.source_hash(qualname)
        answer: dict[str, Any] = {
            "identity": f"{relpath}::{qualname}",
            "aliases": [],
            "runs": [],
            "stale": None,
            "watching": root.resolve() in {r.resolve() for r in self.watchers},
        }
        if self.ctx.store(root) is None:
            return answer
        threshold = self.ctx.config.settings_for(root).regression_threshold
        work = functools.partial(
            history_answer, answer, path, root, relpath, qualname, current, from_buffer, threshold
        )
        return await asyncio.get_running_loop().run_in_executor(self._history_pool, work)
