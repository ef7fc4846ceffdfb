"""`.trnlens/` in the project root: every run in SQLite (stdlib sqlite3, WAL) plus its artifacts.

Layout::

    .trnlens/.gitignore          "*": nothing here belongs in git
    .trnlens/runs.sqlite         one row per run, the whole result JSON included
    .trnlens/artifacts/<run-id>/ result.json, trace.json, NEFF/NTFF ...
    .trnlens/staging/<run-id>/   where the agent writes while a run is in flight

Writing a run is atomic and ordered so that a kill at any moment loses no earlier run: the run's
directory is completed under ``staging/`` (result.json written to a temp file, fsynced, renamed),
moved into ``artifacts/`` with one rename, and only then recorded in a single SQLite transaction.
A directory that made it into ``artifacts/`` without its row (killed between the two) is picked up
on the next open. Artifacts beyond a size cap are pruned oldest first; the rows (and so the
history) stay.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trnlens import results

log = logging.getLogger(__name__)

DB_VERSION = 1
QUICK_CHECK_MAX_BYTES = 64 << 20  # stores up to this size are fully checked on open
DEFAULT_CAP_BYTES = 1 << 30  # 1 GiB of artifacts

_COLUMNS = """
    run_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    path TEXT NOT NULL,
    qualname TEXT NOT NULL,
    source_hash TEXT,
    variant TEXT,
    target TEXT,
    host TEXT,
    backend TEXT,
    device TEXT,
    time_basis TEXT,
    mode TEXT,
    inputs_key TEXT,
    git_commit TEXT,
    dispatches REAL,
    wall_us REAL,
    cpu_us REAL,
    device_us REAL,
    median_us REAL,
    error_kind TEXT,
    comparison_id TEXT,
    artifacts_pruned INTEGER NOT NULL DEFAULT 0,
    result_json TEXT NOT NULL
"""


class StoreError(Exception):
    """The store cannot be written (read-only, disk full, gone): a message fit for the user."""


class NewerStore(StoreError):
    """The store was written by a newer trnlens: this one must not read or migrate it."""


class RunExists(StoreError):
    """A run with this id is already stored (a result sent twice): the first one stays."""


class Store:
    def __init__(self, project_root: str | Path, cap_bytes: int = DEFAULT_CAP_BYTES):
        self.root = Path(project_root) / ".trnlens"
        self.artifacts = self.root / "artifacts"
        self.staging = self.root / "staging"
        self.cap_bytes = cap_bytes
        self.db_path = self.root / "runs.sqlite"
        # Set when a damaged database was moved aside on open: what happened, for the user.
        self.recovered: str | None = None
        try:
            self._make_layout()
            self._db = self._open()
        except sqlite3.DatabaseError as exc:
            self._db = self._replace_damaged(exc)
        except OSError as exc:
            raise StoreError(f"cannot create the run store in {self.root}: {exc}") from None

    @classmethod
    def reader(cls, project_root: str | Path) -> Store:
        """A read-only store on a connection of the calling thread's own, for work off the
        language server's loop (a sqlite connection stays in the thread that opened it). No
        layout, check or recovery: the store must exist (StoreError when it does not)."""
        self = cls.__new__(cls)
        self.root = Path(project_root) / ".trnlens"
        self.artifacts = self.root / "artifacts"
        self.staging = self.root / "staging"
        self.cap_bytes = DEFAULT_CAP_BYTES
        self.db_path = self.root / "runs.sqlite"
        self.recovered = None
        try:
            _refuse_symlink(self.root)
            self._db = sqlite3.connect(
                f"{self.db_path.resolve().as_uri()}?mode=ro", uri=True, timeout=30
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot read the run store {self.db_path}: {exc}") from None
        self._db.row_factory = sqlite3.Row
        self._inode = _inode(self.db_path)
        return self

    def _make_layout(self) -> None:
        for directory in (self.root, self.artifacts, self.staging):
            _refuse_symlink(directory)
            directory.mkdir(parents=True, exist_ok=True)
        ignore = self.root / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n", encoding="utf-8")

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        self._db = db
        try:
            # Switching to WAL takes a lock a concurrent opener may hold for a moment.
            for attempt in range(50):
                try:
                    db.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or attempt == 49:
                        raise
                    time.sleep(0.1)
            db.execute("PRAGMA synchronous=NORMAL")
        except BaseException:
            db.close()
            raise
        return db

    def _open(self) -> sqlite3.Connection:
        """Opens, checks and migrates the database; sqlite3.DatabaseError when it is damaged."""
        db = self._connect()
        try:
            try:
                small = self.db_path.stat().st_size <= QUICK_CHECK_MAX_BYTES
            except OSError:
                small = True
            if small:  # a whole check of a large store would slow every open: its queries tell
                verdict = db.execute("PRAGMA quick_check").fetchone()[0]
                if verdict != "ok":
                    raise sqlite3.DatabaseError(f"integrity check: {verdict}")
            self._migrate()
            self._recover()
        except (sqlite3.DatabaseError, StoreError):
            db.close()
            raise
        except OSError as exc:
            db.close()
            raise StoreError(f"cannot read the run store in {self.root}: {exc}") from None
        self._inode = _inode(self.db_path)
        return db

    def _replace_damaged(self, problem: Exception) -> sqlite3.Connection:
        """Moves a damaged database aside (kept for a person to look at), starts a fresh one
        and rebuilds its rows from the runs' result.json files."""
        if not _damaged(problem):
            hint = " Is .trnlens read-only?" if _unwritable(problem) else ""
            raise StoreError(
                f"cannot open the run store {self.db_path} ({problem}).{hint}"
            ) from None
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        aside = self.db_path.with_name(f"runs.sqlite.damaged-{stamp}-{os.getpid()}")
        try:
            for suffix in ("", "-wal", "-shm"):
                source = self.db_path.with_name(self.db_path.name + suffix)
                if source.exists():
                    os.replace(source, aside.with_name(aside.name + suffix))
            db = self._open()
        except (OSError, sqlite3.DatabaseError) as exc:
            raise StoreError(f"the run store {self.db_path} is damaged ({problem}) and could "
                             f"not be replaced: {exc}") from None  # fmt: skip
        rebuilt = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        self.recovered = (
            f"the run store {self.db_path} was damaged ({problem}): moved aside to "
            f"{aside.name}; a fresh one holds the {rebuilt} runs rebuilt from artifacts/"
        )
        log.warning(self.recovered)
        return db

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- schema
    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            with self._transaction():
                self._db.execute(f"CREATE TABLE IF NOT EXISTS runs ({_COLUMNS})")
                self._db.execute(
                    "CREATE INDEX IF NOT EXISTS runs_by_function"
                    " ON runs(path, qualname, created_at)"
                )
                self._db.execute(f"PRAGMA user_version = {DB_VERSION}")
        elif version > DB_VERSION:
            raise NewerStore(
                f"the run store {self.db_path} was written by a newer trnlens (store version "
                f"{version}, this one reads up to {DB_VERSION}): upgrade trnlens, or move "
                f"{self.root} aside to start an empty store"
            )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- writing
    def staging_dir(self) -> Path:
        """Where the agent writes a request's runs (one sub-directory per run id)."""
        return self.staging

    def add(self, result: dict, comparison_id: str | None = None) -> str:
        """Stores one run (result JSON + whatever the agent left in staging/<run-id>/)."""
        results.check(result)  # the run id among the rest: it names folders below
        run_id = result["run_id"]
        try:
            self._still_there()
            final = self.artifacts / run_id
            if final.exists() or self.get(run_id) is not None:
                raise RunExists(f"run {run_id} is already stored in {self.root}; kept the first")
            staged = self.staging / run_id
            staged.mkdir(parents=True, exist_ok=True)
            _write_atomic(staged / "result.json", json.dumps(result, indent=1))
            try:
                os.replace(staged, final)
            except OSError:
                if final.exists():  # another writer stored it between our check and the rename
                    raise RunExists(f"run {run_id} is already stored in {self.root}") from None
                raise
            _fsync_dir(self.artifacts)
            self._insert(result, comparison_id)
        except (OSError, sqlite3.DatabaseError) as exc:
            raise StoreError(
                f"run {run_id} could not be stored in {self.root} ({exc}); earlier runs are "
                "untouched"
            ) from None
        self.prune()
        return run_id

    def _still_there(self) -> None:
        """Puts back what was deleted under a long-lived store (the language server's): the
        folders, and the database itself when its file is gone or was replaced."""
        self._make_layout()
        if _inode(self.db_path) != self._inode:
            log.warning("%s was removed or replaced: reopening it", self.db_path)
            self._db.close()
            try:
                self._db = self._open()
            except sqlite3.DatabaseError as exc:
                self._db = self._replace_damaged(exc)

    def _insert(self, result: dict, comparison_id: str | None) -> None:
        fn = result["function"]
        timing = result.get("timing") or {}
        row = {
            "run_id": result["run_id"],
            "created_at": result["created_at"],
            "path": fn["path"],
            "qualname": fn["qualname"],
            "source_hash": fn.get("source_hash"),
            "variant": (result.get("variant") or {}).get("label"),
            "target": result.get("target"),
            "host": result.get("host"),
            "backend": result.get("backend"),
            "device": result.get("device"),
            "time_basis": result.get("time_basis"),
            "mode": result.get("mode"),
            "inputs_key": json.dumps(result.get("inputs"), sort_keys=True),
            "git_commit": result.get("git_commit"),
            "dispatches": result.get("dispatches_per_step"),
            "wall_us": result.get("wall_time_per_step_us"),
            "cpu_us": result.get("cpu_time_per_step_us"),
            "device_us": result.get("device_time_per_step_us"),
            "median_us": timing.get("median_us"),
            "error_kind": (result.get("error") or {}).get("kind"),
            "comparison_id": comparison_id,
            "result_json": json.dumps(result),
        }
        names = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        with self._transaction():
            self._db.execute(f"INSERT OR IGNORE INTO runs ({names}) VALUES ({marks})", row)

    def _recover(self) -> None:
        """Finishes what a killed writer left: rows for complete artifact dirs, no stale staging."""
        known = {r[0] for r in self._db.execute("SELECT run_id FROM runs")}
        for directory in self.artifacts.iterdir():
            if directory.name in known or not directory.is_dir():
                continue
            try:
                result = json.loads((directory / "result.json").read_text("utf-8"))
                results.check(result)
            except (OSError, ValueError):
                continue  # incomplete or foreign: leave it for a person to look at
            self._insert(result, None)
        cutoff = time.time() - 24 * 3600
        for directory in self.staging.iterdir():
            # A run may be in flight in another process: only day-old leftovers are garbage.
            if directory.is_dir() and directory.stat().st_mtime < cutoff:
                shutil.rmtree(directory, ignore_errors=True)

    # -- reading
    def get(self, run_id: str) -> dict | None:
        row = self._db.execute(
            "SELECT result_json FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        return json.loads(row[0]) if row else None

    def runs(
        self, path: str | None = None, qualname: str | None = None, limit: int = 100
    ) -> list[dict]:
        query = "SELECT result_json FROM runs"
        args: list[str | int] = []
        clauses = []
        if path is not None:
            clauses.append("path = ?")
            args.append(path)
        if qualname is not None:
            clauses.append("qualname = ?")
            args.append(qualname)
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        query += " ORDER BY created_at DESC, run_id DESC LIMIT ?"
        args.append(limit)
        return [json.loads(r[0]) for r in self._db.execute(query, args)]

    def comparison(self, run_id: str) -> list[dict]:
        """The variants stored with ``run_id`` by one comparison, in the comparison's order
        (just that run when it was a plain profile; none when there is no such run)."""
        row = self._db.execute(
            "SELECT comparison_id FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            return []
        if row[0] is None:
            run = self.get(run_id)
            return [run] if run is not None else []
        rows = self._db.execute(
            "SELECT result_json FROM runs WHERE comparison_id = ? ORDER BY created_at, run_id",
            (row[0],),
        )
        found = [json.loads(r[0]) for r in rows]

        def order(run: dict):
            # Runs stored before variants carried their index: the baseline's id names the group.
            index = (run.get("comparison") or {}).get("index")
            return index if index is not None else (0 if run["run_id"] == row[0] else 1)

        return sorted(found, key=order)

    def qualnames(self, path: str) -> set[str]:
        """The functions of ``path`` with a stored run (one query, not one per function)."""
        rows = self._db.execute("SELECT DISTINCT qualname FROM runs WHERE path = ?", (path,))
        return {r[0] for r in rows}

    def latest(self, path: str, qualname: str) -> dict | None:
        found = self.runs(path, qualname, limit=1)
        return found[0] if found else None

    # -- history and watching (read-only queries, plus adopting a synced run)
    def source_hashes(self, identities: list[tuple[str, str]]) -> list[str]:
        """Distinct source hashes measured for these (path, qualname) identities."""
        found: set[str] = set()
        for path, qualname in identities:
            rows = self._db.execute(
                "SELECT DISTINCT source_hash FROM runs WHERE path = ? AND qualname = ?"
                " AND source_hash IS NOT NULL",
                (path, qualname),
            )
            found.update(r[0] for r in rows)
        return sorted(found)

    def identities_with_hashes(self, hashes: list[str]) -> list[tuple[str, str]]:
        """(path, qualname) of every identity with a run of one of these source hashes."""
        if not hashes:
            return []
        marks = ", ".join("?" for _ in hashes)
        rows = self._db.execute(
            f"SELECT DISTINCT path, qualname FROM runs WHERE source_hash IN ({marks})"
            " ORDER BY path, qualname",
            hashes,
        )
        return [(r[0], r[1]) for r in rows]

    def identities(self, path: str | None = None) -> list[tuple[str, str]]:
        """(path, qualname) of every function with runs (of one file, with ``path``)."""
        if path is None:
            rows = self._db.execute("SELECT DISTINCT path, qualname FROM runs")
        else:
            rows = self._db.execute(
                "SELECT DISTINCT path, qualname FROM runs WHERE path = ?", (path,)
            )
        return sorted((r[0], r[1]) for r in rows)

    def find_run_id(self, prefix: str) -> list[str]:
        """Run ids starting with ``prefix`` (at most two: enough to tell it is ambiguous)."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._db.execute(
            "SELECT run_id FROM runs WHERE run_id LIKE ? ESCAPE '\\' ORDER BY run_id LIMIT 2",
            (escaped + "%",),
        )
        return [r[0] for r in rows]

    def data_version(self) -> int:
        """Changes whenever another connection commits to the database (PRAGMA data_version)."""
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def rows_after(self, rowid: int) -> list[tuple[int, str, str, str]]:
        """(rowid, run_id, path, qualname) of rows inserted after ``rowid``, oldest first."""
        rows = self._db.execute(
            "SELECT rowid, run_id, path, qualname FROM runs WHERE rowid > ? ORDER BY rowid",
            (rowid,),
        )
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def last_rowid(self) -> int:
        return int(self._db.execute("SELECT COALESCE(MAX(rowid), 0) FROM runs").fetchone()[0])

    def adopt(self, run_id: str) -> bool:
        """Records ``artifacts/<run_id>/result.json`` written by another process without a row
        (a sync from another host); True when a row was added."""
        if self.get(run_id) is not None:
            return False
        try:
            text = (self.artifacts / run_id / "result.json").read_text("utf-8")
            result = results.check(json.loads(text))
        except (OSError, ValueError):
            return False
        if result.get("run_id") != run_id:
            return False
        self._insert(result, None)
        return self.get(run_id) is not None

    def clear(self, path: str | None = None) -> int:
        """Forgets runs (all, or one file's) and their artifacts."""
        if path is None:
            rows = self._db.execute("SELECT run_id FROM runs").fetchall()
        else:
            rows = self._db.execute("SELECT run_id FROM runs WHERE path = ?", (path,)).fetchall()
        with self._transaction():
            for (run_id,) in rows:
                self._db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
        for (run_id,) in rows:
            shutil.rmtree(self.artifacts / run_id, ignore_errors=True)
        return len(rows)

    # -- size cap
    def artifacts_size(self) -> int:
        return sum(f.stat().st_size for f in self.artifacts.rglob("*") if f.is_file())

    def prune(self) -> int:
        """Deletes the oldest runs' artifact files (result.json stays) until under the cap."""
        total = self.artifacts_size()
        if total <= self.cap_bytes:
            return 0
        pruned = 0
        oldest = self._db.execute(
            "SELECT run_id FROM runs WHERE artifacts_pruned = 0 ORDER BY created_at, run_id"
        ).fetchall()
        for (run_id,) in oldest:
            if total <= self.cap_bytes:
                break
            directory = self.artifacts / run_id
            for file in sorted(directory.rglob("*"), reverse=True):
                if file.is_file() and file.name != "result.json":
                    total -= file.stat().st_size
                    file.unlink()
                elif file.is_dir():
                    shutil.rmtree(file, ignore_errors=True)
            with self._transaction():
                self._db.execute("UPDATE runs SET artifacts_pruned = 1 WHERE run_id = ?", (run_id,))
            pruned += 1
        return pruned


def _write_atomic(path: Path, text: str) -> None:
    temp = path.with_name(path.name + ".tmp")
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)  # a full disk leaves no half-written file behind
        raise


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _damaged(problem: Exception) -> bool:
    """Whether SQLite says the file itself is bad (not busy, not read-only, not missing)."""
    text = str(problem).lower()
    return any(
        sign in text for sign in ("not a database", "malformed", "integrity check", "corrupt")
    )


def _unwritable(problem: Exception) -> bool:
    text = str(problem).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


def _refuse_symlink(directory: Path) -> None:
    """.trnlens and its folders are never followed out of the project through a symlink."""
    if directory.is_symlink():
        raise StoreError(f"{directory} is a symbolic link: trnlens writes only inside the project")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
