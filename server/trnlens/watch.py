"""Watching a workspace on disk: changed Python files and runs written by other processes.

A watchdog observer on the project root feeds a debounced queue; the consumer gets one
:class:`Batch` per quiet moment (``debounce_s`` after the last event, and at most ``max_delay_s``
after the first, so a steady stream of events is never starved). What is reported:

- Python files (``.py``/``.pyi``) created, modified, deleted, or renamed (the old path counts as
  deleted, the new one as changed), outside ignored places: ``.git`` and other VCS folders, virtual
  environments (by name, or any folder holding ``pyvenv.cfg``), caches, ``node_modules``, and what
  ``.gitignore`` ignores (asked of ``git check-ignore --stdin`` in one batch per flush, so nested
  ignore files, ``info/exclude`` and global excludes count; outside a git repository the root's
  ``.gitignore`` is matched here, negations aside);
- in ``.trnlens/``, only runs: a new ``artifacts/<run-id>/`` (or its ``result.json``), and writes
  to ``runs.sqlite`` or its WAL (another process stored a run).

Memory stays bounded on large trees and bursts: the queue holds at most ``max_pending`` paths;
beyond that it drops them and the batch says ``rescan`` instead, with the time from which files
changed, so the consumer walks the tree for Python files modified since (streaming, pruned by the
same rules). Deleted directories, unreadable directories and a vanished root are survived: the
observer's errors are logged, and when the observer itself stops it is restarted.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

log = logging.getLogger(__name__)

PYTHON_SUFFIXES = (".py", ".pyi")
IGNORED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".jj", "__pycache__", "node_modules", ".venv", "venv", ".tox",
        ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", "site-packages",
        ".ipynb_checkpoints", ".idea", ".vscode",
    }
)  # fmt: skip
STORE_DIR = ".trnlens"
STORE_FILES = frozenset({"runs.sqlite", "runs.sqlite-wal"})


@dataclass
class Batch:
    changed: set[Path] = field(default_factory=set)  # Python files created, modified, moved here
    deleted: set[Path] = field(default_factory=set)  # Python files (or folders) gone
    results: set[str] = field(default_factory=set)  # run ids of new artifacts/<run-id>/
    store_changed: bool = False  # runs.sqlite (or its WAL) was written
    rescan: bool = False  # too many events: walk for files modified since ``since``
    since: float = 0.0
    events: int = 0  # raw events folded into this batch

    def __bool__(self) -> bool:
        return bool(self.changed or self.deleted or self.results or self.store_changed
                    or self.rescan)  # fmt: skip


class Ignores:
    """What the workspace ignores: fixed folders, virtual environments, ``.gitignore``."""

    def __init__(self, root: Path, use_gitignore: bool = True):
        self.root = root
        self.use_gitignore = use_gitignore
        self._venvs: dict[Path, bool] = {}
        self._git: bool | None = None
        self._patterns: tuple[float, list[tuple[str, bool, bool]]] | None = None

    def is_venv(self, directory: Path) -> bool:
        known = self._venvs.get(directory)
        if known is None:
            if len(self._venvs) > 20000:  # bounded: forget and re-learn
                self._venvs.clear()
            known = self._venvs[directory] = (directory / "pyvenv.cfg").exists()
        return known

    def skip_relative(self, parts: tuple[str, ...]) -> bool:
        """Fixed rules on a root-relative path (``parts``; the last is the file or folder)."""
        if any(part in IGNORED_DIRS for part in parts):
            return True
        directory = self.root
        for part in parts[:-1]:
            directory = directory / part
            if self.is_venv(directory):
                return True
        return False

    # -- .gitignore
    def in_git(self) -> bool:
        if self._git is None:
            self._git = _run_git(self.root, ["rev-parse", "--is-inside-work-tree"]) is not None
        return self._git

    def gitignored(self, paths: list[Path]) -> set[Path]:
        """The subset of ``paths`` that git (or the root's .gitignore) ignores."""
        if not self.use_gitignore or not paths:
            return set()
        if self.in_git():
            text = "\0".join(str(p) for p in paths) + "\0"
            out = _run_git(self.root, ["check-ignore", "--stdin", "-z"], text, ok=(0, 1))
            if out is not None:
                return {Path(p) for p in out.split("\0") if p}
            self._git = None  # ask again next time (the repository may be gone)
        return {p for p in paths if self._matches(p)}

    def _rules(self) -> list[tuple[str, bool, bool]]:
        path = self.root / ".gitignore"
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return []
        if self._patterns is None or self._patterns[0] != mtime:
            rules = []
            for line in path.read_text("utf-8", errors="replace").splitlines():
                line = line.strip()
                if not line or line.startswith(("#", "!")):
                    continue
                dir_only = line.endswith("/")
                line = line.rstrip("/")
                anchored = "/" in line
                rules.append((line.lstrip("/"), dir_only, anchored))
            self._patterns = (mtime, rules)
        return self._patterns[1]

    def _matches(self, path: Path) -> bool:
        try:
            relative = path.relative_to(self.root).as_posix()
        except ValueError:
            return False
        parts = relative.split("/")
        for pattern, dir_only, anchored in self._rules():
            if anchored:
                prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
                candidates = prefixes[:-1] if dir_only else prefixes
                if any(fnmatch.fnmatchcase(c, pattern) for c in candidates):
                    return True
            else:
                names = parts[:-1] if dir_only else parts
                if any(fnmatch.fnmatchcase(n, pattern) for n in names):
                    return True
        return False


def _run_git(root: Path, args: list[str], stdin: str | None = None, ok=(0,)) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], input=stdin, capture_output=True, text=True,
            timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode in ok else None


def _stop_observer(observer: BaseObserver) -> None:
    observer.stop()
    try:
        observer.join(timeout=5)
    except RuntimeError:  # never started
        pass


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: WorkspaceWatcher):
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            self.watcher._event(event)
        except Exception:  # never let one odd event kill the observer thread
            log.exception("watch: could not handle %r", event)


class WorkspaceWatcher:
    """Watches ``root``; calls ``on_batch(batch)`` from its own thread, one batch at a time."""

    def __init__(
        self,
        root: str | Path,
        on_batch: Callable[[Batch], None],
        debounce_s: float = 0.2,
        max_delay_s: float = 1.0,
        max_pending: int = 5000,
        use_gitignore: bool = True,
        polling: bool = False,
    ):
        self.root = Path(os.path.abspath(root))
        self.on_batch = on_batch
        self.debounce_s = debounce_s
        self.max_delay_s = max_delay_s
        self.max_pending = max_pending
        self.polling = polling
        self.ignores = Ignores(self.root, use_gitignore)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._pending = Batch()
        self._dirs: set[Path] = set()  # folders created or moved in: walked at the flush
        self._since = time.time()  # wall time of the last flush (a rescan looks from there)
        self._first = 0.0
        self._last = 0.0
        self._stopped = threading.Event()
        self._observer: BaseObserver | None = None
        self._flusher: threading.Thread | None = None
        self.stats = {"events": 0, "batches": 0, "overflows": 0, "restarts": 0}

    # -- life cycle
    def start(self) -> WorkspaceWatcher:
        """Starts watching. Slow on a big tree (watchdog walks it to add a watch per folder, a
        second or more on a cold disk): the language server calls it in a worker thread, and
        :meth:`stop` may come meanwhile, from another thread: then nothing is left running."""
        observer: BaseObserver | None = self._new_observer()
        with self._lock:
            if not self._stopped.is_set():  # else stop() came during the walk: undo
                self._observer, observer = observer, None
                self._flusher = threading.Thread(
                    target=self._flush_loop, name="trnlens-watch", daemon=True
                )
                self._flusher.start()
        if observer is not None:
            _stop_observer(observer)
        return self

    def _new_observer(self) -> BaseObserver:
        """A started observer on the root (the caller keeps it)."""
        observer = PollingObserver(timeout=1.0) if self.polling else Observer()
        try:
            observer.schedule(_Handler(self), str(self.root), recursive=True)
            observer.start()
        except OSError as exc:  # e.g. the inotify watch limit on a huge tree
            log.warning("watch: %s; falling back to polling %s", exc, self.root)
            observer = PollingObserver(timeout=2.0)
            observer.schedule(_Handler(self), str(self.root), recursive=True)
            observer.start()
        return observer

    def stop(self) -> None:
        with self._wake:
            self._stopped.set()
            self._wake.notify_all()
            observer, flusher = self._observer, self._flusher
        if observer is not None:
            _stop_observer(observer)
        if flusher is not None and flusher is not threading.current_thread():
            flusher.join(timeout=5)

    # -- events (observer thread)
    def _event(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        if kind in ("opened", "closed_no_write"):
            return
        paths = [(event.src_path, kind == "moved" or kind == "deleted")]
        if kind == "moved":
            paths.append((event.dest_path, False))
        with self._wake:
            self.stats["events"] += 1
            touched = False
            for raw, gone in paths:
                raw = os.fsdecode(raw)
                if raw and self._classify(Path(raw), gone, event.is_directory, kind):
                    touched = True
            if not touched:
                return
            now = time.monotonic()
            if not self._first:
                self._first = now
            self._last = now
            self._pending.events += 1
            self._wake.notify_all()

    def _classify(self, path: Path, gone: bool, is_dir: bool, kind: str) -> bool:
        """Adds ``path`` to the pending batch (lock held); False when it is of no interest."""
        try:
            parts = path.relative_to(self.root).parts
        except ValueError:
            return False
        if not parts:
            return False
        pending = self._pending
        if parts[0] == STORE_DIR:
            if len(parts) == 2 and parts[1] in STORE_FILES:
                pending.store_changed = True
                return True
            if len(parts) >= 3 and parts[1] == "artifacts" and not gone:
                if (len(parts) == 3 and is_dir) or (len(parts) == 4 and parts[3] == "result.json"):
                    pending.results.add(parts[2])
                    return True
            return False
        if self.ignores.skip_relative(parts):
            return False
        if is_dir:
            if gone:  # a folder deleted or moved away: everything under it is gone
                pending.deleted.add(path)
                return self._bounded()
            if kind in ("created", "moved"):  # files may have landed before we watched it
                self._dirs.add(path)
                return self._bounded()
            return False
        if not path.name.endswith(PYTHON_SUFFIXES):
            return False
        if gone:
            pending.deleted.add(path)
            pending.changed.discard(path)
        else:
            pending.changed.add(path)
            pending.deleted.discard(path)
        return self._bounded()

    def _bounded(self) -> bool:
        pending = self._pending
        if len(pending.changed) + len(pending.deleted) + len(self._dirs) > self.max_pending:
            if not pending.rescan:
                self.stats["overflows"] += 1
                pending.rescan = True
                pending.since = self._since - 2.0  # mtime granularity
            pending.changed.clear()
            pending.deleted.clear()
            self._dirs.clear()
        return True

    # -- flushing (own thread)
    def _flush_loop(self) -> None:
        while not self._stopped.is_set():
            with self._wake:
                while not self._stopped.is_set():
                    if self._first:
                        now = time.monotonic()
                        quiet = now - self._last >= self.debounce_s
                        overdue = now - self._first >= self.max_delay_s
                        if quiet or overdue:
                            break
                        wait = min(self.debounce_s - (now - self._last),
                                   self.max_delay_s - (now - self._first))  # fmt: skip
                        self._wake.wait(max(wait, 0.01))
                    else:
                        self._wake.wait(1.0)
                        self._check_observer()
                if self._stopped.is_set():
                    return
                batch, dirs = self._pending, self._dirs
                self._pending, self._dirs = Batch(), set()
                self._first = self._last = 0.0
                self._since = time.time()
            try:
                self._deliver(batch, dirs)
            except Exception:
                log.exception("watch: handling a batch failed")

    def _check_observer(self) -> None:
        """Restarts the observer when it died (a root removed and recreated, an odd error)."""
        observer = self._observer
        if observer is None or observer.is_alive() or self._stopped.is_set():
            return
        if not self.root.is_dir():
            return
        log.warning("watch: observer on %s stopped; restarting it", self.root)
        self.stats["restarts"] += 1
        with_since = time.time()
        try:
            self._observer = self._new_observer()  # the flush loop holds the lock here
        except OSError as exc:
            log.warning("watch: cannot watch %s: %s", self.root, exc)
            return
        self._pending.rescan = True
        self._pending.since = with_since - 5
        self._first = self._last = time.monotonic()

    def _deliver(self, batch: Batch, dirs: set[Path]) -> None:
        for directory in dirs:  # new folders: their Python files (bounded by the walk's pruning)
            for path in self.walk(directory):
                batch.changed.add(path)
                if len(batch.changed) > self.max_pending:
                    batch.rescan, batch.since = True, 0.0
                    batch.changed.clear()
                    break
        if batch.changed:
            ignored = self.ignores.gitignored(sorted(batch.changed))
            batch.changed -= ignored
        if batch:
            self.stats["batches"] += 1
            self.on_batch(batch)

    # -- walking (rescans)
    def walk(self, top: Path | None = None, since: float = 0.0) -> Iterator[Path]:
        """Python files under ``top`` (default: the root) modified at or after ``since``,
        pruned by the fixed rules (``.gitignore`` is the caller's: see ``Ignores.gitignored``)."""
        top = top or self.root

        def error(exc: OSError) -> None:
            log.debug("watch: cannot read %s", exc.filename)

        for directory, subdirs, files in os.walk(top, onerror=error):
            here = Path(directory)
            subdirs[:] = [
                d
                for d in subdirs
                if d not in IGNORED_DIRS and d != STORE_DIR and not self.ignores.is_venv(here / d)
            ]
            for name in files:
                if not name.endswith(PYTHON_SUFFIXES):
                    continue
                path = here / name
                if since:
                    try:
                        if path.stat().st_mtime < since:
                            continue
                    except OSError:
                        continue
                yield path
