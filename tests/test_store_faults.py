"""Store faults (issue 13): a damaged runs.sqlite, a read-only or full .trnlens/, folders deleted
under a long-lived store, several writers at once. (SIGKILL of a writer mid-write: test_store.)

Damage is detected on open, the file moved aside and named, a fresh store rebuilt from the runs'
result.json files; nothing stored is lost and nothing crashes.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from trnlens import store as store_module
from trnlens.store import NewerStore, Store, StoreError

from tests import components

from .test_store import fake_result


def filled(root: Path, count: int = 5) -> list[str]:
    with Store(root) as store:
        return [store.add(fake_result(i)) for i in range(count)]


def damage_truncate(db: Path) -> None:
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])


def damage_zero(db: Path) -> None:
    db.write_bytes(b"\0" * db.stat().st_size)


def damage_garbage(db: Path) -> None:
    db.write_bytes(os.urandom(3000) + b"not sqlite at all")


def damage_pages(db: Path) -> None:
    data = bytearray(db.read_bytes())
    for page in range(1, len(data) // 4096):  # every page after the header's
        data[page * 4096 + 8 : page * 4096 + 400] = os.urandom(392)
    db.write_bytes(bytes(data))


DAMAGES = [damage_truncate, damage_zero, damage_garbage, damage_pages]


def checkpointed(root: Path) -> Path:
    """The database with everything in the main file (no WAL), as after a clean close."""
    import sqlite3

    db = root / ".trnlens" / "runs.sqlite"
    sqlite3.connect(db).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    return db


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__)
def test_damaged_database_is_moved_aside_and_rebuilt(tmp_path, damage):
    stored = filled(tmp_path, count=40)  # several pages: truncation cuts real rows
    damage(checkpointed(tmp_path))
    with Store(tmp_path) as store:
        assert store.recovered is not None
        assert "moved aside" in store.recovered and "40 runs rebuilt" in store.recovered
        assert {r["run_id"] for r in store.runs(limit=100)} == set(stored)  # nothing lost
        store.add(fake_result(99))  # and it takes new runs
    aside = [p.name for p in (tmp_path / ".trnlens").glob("runs.sqlite.damaged-*")]
    assert aside and any(not name.endswith(("-wal", "-shm")) for name in aside)
    with Store(tmp_path) as store:
        assert store.recovered is None  # the fresh one is healthy


def test_damaged_database_is_reported_by_the_cli(tmp_path):
    filled(tmp_path, count=3)
    damage_garbage(checkpointed(tmp_path))
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "trnlens", "history", "m.py::f"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr


def test_a_store_written_by_a_newer_trnlens_is_a_clear_message(tmp_path):
    filled(tmp_path, count=1)
    db = tmp_path / ".trnlens" / "runs.sqlite"
    connection = sqlite3.connect(db)
    connection.execute(f"PRAGMA user_version = {store_module.DB_VERSION + 1}")
    connection.close()
    with pytest.raises(NewerStore, match="written by a newer trnlens .* upgrade trnlens"):
        Store(tmp_path)
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    for command in (["history", "m.py::f"], ["report"], ["profile", "m.py::f"]):
        done = subprocess.run(
            [sys.executable, "-m", "trnlens", *command],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 4, (command, done.stderr)
        assert "was written by a newer trnlens" in done.stderr
    connection = sqlite3.connect(db)
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    connection.close()
    assert version == store_module.DB_VERSION + 1  # left as it was: not migrated, not moved aside


@pytest.fixture
def read_only_mount(tmp_path):
    """.trnlens on a read-only bind mount (root ignores file permissions, not mount flags)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        components.absent("needs root and mount(8) for a read-only bind mount")
    filled(tmp_path, count=3)
    store_dir = tmp_path / ".trnlens"
    done = subprocess.run(["mount", "--bind", "-o", "ro", str(store_dir), str(store_dir)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        components.absent(f"no bind mounts here: {done.stderr.strip()}")
    subprocess.run(["mount", "-o", "remount,bind,ro", str(store_dir)], check=True)
    yield tmp_path
    subprocess.run(["umount", str(store_dir)], check=True)


def test_read_only_store(read_only_mount):
    root = read_only_mount
    before = sorted(p.name for p in (root / ".trnlens").iterdir())
    with pytest.raises(StoreError) as caught:
        with Store(root) as store:
            store.add(fake_result(50))
    assert "read-only" in str(caught.value) or "Read-only" in str(caught.value)
    assert sorted(p.name for p in (root / ".trnlens").iterdir()) == before  # nothing moved


def test_full_disk_is_a_clear_error_and_leaves_no_partial_file(tmp_path, monkeypatch):
    """ENOSPC simulated (a mocked fsync): no tmpfs of a chosen size without more root mounts."""
    stored = filled(tmp_path, count=3)

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with Store(tmp_path) as store:
        monkeypatch.setattr(store_module.os, "fsync", full)
        with pytest.raises(StoreError) as caught:
            store.add(fake_result(60))
        monkeypatch.undo()
        assert "No space left on device" in str(caught.value)
        assert "earlier runs are untouched" in str(caught.value)
        assert not list(store.staging.rglob("*.tmp"))
        assert {r["run_id"] for r in store.runs()} == set(stored)
        store.add(fake_result(61))  # space is back: the store works on
        assert len(store.runs()) == 4


def test_folders_deleted_under_a_long_lived_store(tmp_path):
    """The language server holds its store for hours: a user deletes artifacts/, or .trnlens."""
    with Store(tmp_path) as store:
        store.add(fake_result(1))
        shutil.rmtree(store.artifacts)
        store.add(fake_result(2))  # the folder comes back, the run is stored
        assert (store.artifacts / fake_result(2)["run_id"] / "result.json").exists()
        shutil.rmtree(tmp_path / ".trnlens")
        store.add(fake_result(3))  # a fresh database, not writes into a deleted file
        assert [r["run_id"] for r in store.runs()] == [fake_result(3)["run_id"]]
    with Store(tmp_path) as store:
        assert [r["run_id"] for r in store.runs()] == [fake_result(3)["run_id"]]


def test_symlinked_store_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / ".trnlens").symlink_to(outside)
    with pytest.raises(StoreError, match="symbolic link"):
        Store(project)
    assert list(outside.iterdir()) == []


def test_store_files_honour_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        filled(tmp_path, count=1)
    finally:
        os.umask(old)
    for path in [tmp_path / ".trnlens", *(tmp_path / ".trnlens").rglob("*")]:
        assert path.stat().st_mode & 0o077 == 0, path


WRITER = r"""
import sys
sys.path.insert(0, {tests!r})
from test_store import fake_result
from trnlens.store import Store
with Store({root!r}) as store:
    for i in range({start}, {start} + {count}):
        store.add(fake_result(i))
"""


def test_concurrent_writers_lose_nothing(tmp_path):
    """Three processes (two servers and a CLI, say) open a fresh store and write at once."""
    count = 40
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER.format(
                    tests=str(Path(__file__).parent),
                    root=str(tmp_path),
                    start=n * 1000,
                    count=count,
                ),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for n in range(3)
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    with Store(tmp_path) as store:
        assert store.recovered is None
        ids = {r["run_id"] for r in store.runs(limit=1000)}
    expected = {fake_result(n * 1000 + i)["run_id"] for n in range(3) for i in range(count)}
    assert ids == expected
    for run_id in expected:
        result = json.loads(
            (tmp_path / ".trnlens" / "artifacts" / run_id / "result.json").read_text()
        )
        assert result["run_id"] == run_id
