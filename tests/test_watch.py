"""The workspace watcher on a real filesystem: what it reports, what it ignores (fixed folders,
virtual environments, .gitignore through real git), runs written by other processes, deleted and
unreadable folders, and a burst of thousands of events (figures printed)."""

from __future__ import annotations

import itertools
import os
import queue
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from trnlens.store import Store
from trnlens.watch import Batch, WorkspaceWatcher

from .test_store import fake_result

_markers = itertools.count()


class Collector:
    def __init__(self, root: Path, **options):
        self.root = root
        self.batches: queue.Queue[Batch] = queue.Queue()
        options.setdefault("debounce_s", 0.1)
        # start() returns once watchdog's emitters have started, and an inotify emitter adds its
        # watches (the whole tree's) in its start(): events from here on are seen.
        self.watcher = WorkspaceWatcher(root, self.batches.put, **options).start()

    def collect(self, until, timeout: float = 5.0) -> Batch:
        """Batches merged until ``until(merged)`` holds."""
        merged = Batch()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                batch = self.batches.get(timeout=0.05)
            except queue.Empty:
                continue
            merged.changed = (merged.changed - batch.deleted) | batch.changed
            merged.deleted = (merged.deleted - batch.changed) | batch.deleted
            merged.results |= batch.results
            merged.store_changed |= batch.store_changed
            merged.rescan |= batch.rescan
            merged.events += batch.events
            if until(merged):
                return merged
        raise TimeoutError(f"watcher did not report it: {merged}")

    def rest(self) -> Batch:
        """Everything still to be reported of what happened so far, without waiting a fixed
        time: a marker file written now is reported after every earlier event (inotify keeps
        their order, batches are delivered in order), so once it is seen nothing earlier can
        follow. The marker itself is left out of the answer."""
        marker = self.root / f"zz_watch_marker_{next(_markers)}.py"
        marker.write_text("")
        merged = self.collect(lambda b: marker in b.changed)
        merged.changed.discard(marker)
        return merged

    def stop(self):
        self.watcher.stop()


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def watch(root):
    made = []

    def start(**options):
        made.append(Collector(root, **options))
        return made[-1]

    yield start
    for collector in made:
        collector.stop()


def test_python_files_created_modified_renamed_deleted(root, watch):
    w = watch()
    (root / "a.py").write_text("x = 1\n")
    (root / "notes.txt").write_text("ignored: not Python\n")
    assert w.collect(lambda b: root / "a.py" in b.changed).changed == {root / "a.py"}
    (root / "a.py").rename(root / "b.py")
    batch = w.collect(lambda b: root / "b.py" in b.changed and root / "a.py" in b.deleted)
    assert batch.changed == {root / "b.py"}
    (root / "b.py").unlink()
    assert w.collect(lambda b: root / "b.py" in b.deleted).changed == set()


def test_ignores_git_virtual_environments_caches_and_gitignore(root, watch):
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("build/\ngen_*.py\n")
    (root / "sub").mkdir()
    (root / "sub" / ".gitignore").write_text("local.py\n")
    (root / "myenv").mkdir()
    (root / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    for folder in ("build", "myenv/lib", "__pycache__", "node_modules", ".venv/lib"):
        (root / folder).mkdir(parents=True)
    w = watch()
    for name in ("build/x.py", "gen_models.py", "sub/local.py", "myenv/lib/y.py",
                 "__pycache__/z.py", "node_modules/n.py", ".venv/lib/v.py", ".git/hook.py",
                 "sub/kept.py", "kept.py"):  # fmt: skip
        (root / name).write_text("x = 1\n")
    batch = w.collect(lambda b: {root / "kept.py", root / "sub" / "kept.py"} <= b.changed)
    later = w.rest()
    assert batch.changed | later.changed == {root / "kept.py", root / "sub" / "kept.py"}


def test_gitignore_outside_git_is_matched_here(root, watch):
    (root / ".gitignore").write_text("# generated\nout/\n/top_only.py\n*_pb2.py\n")
    (root / "out").mkdir()
    (root / "deep").mkdir()
    w = watch()
    for name in ("out/a.py", "top_only.py", "deep/top_only.py", "deep/m_pb2.py", "m.py"):
        (root / name).write_text("x = 1\n")
    batch = w.collect(
        lambda b: root / "m.py" in b.changed and root / "deep/top_only.py" in b.changed
    )
    later = w.rest()
    assert batch.changed | later.changed == {root / "m.py", root / "deep" / "top_only.py"}


def test_runs_stored_by_another_process_are_reported(root, watch):
    Store(root).close()
    w = watch()
    result = fake_result(7)
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_store import fake_result
        from trnlens.store import Store
        Store({str(root)!r}).add(fake_result(7))
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
    batch = w.collect(lambda b: result["run_id"] in b.results and b.store_changed)
    assert batch.changed == set() and batch.deleted == set()
    # Staging and the rest of .trnlens/ are internals: nothing to report.
    (root / ".trnlens" / "staging" / "x").mkdir()
    (root / ".trnlens" / "staging" / "x" / "result.json").write_text("{}")
    assert not w.rest()


def test_new_folders_and_deleted_folders(root, watch):
    w = watch()
    staged = root.parent / "staged"
    (staged / "pkg" / "inner").mkdir(parents=True)
    (staged / "pkg" / "inner" / "m.py").write_text("x = 1\n")
    (staged / "pkg" / "n.py").write_text("x = 1\n")
    staged.joinpath("pkg").rename(root / "pkg")  # a whole tree arrives at once
    expected = {root / "pkg" / "n.py", root / "pkg" / "inner" / "m.py"}
    assert expected <= w.collect(lambda b: expected <= b.changed).changed
    shutil.rmtree(root / "pkg")
    gone = w.collect(lambda b: root / "pkg" in b.deleted or expected <= b.deleted)
    assert gone.deleted
    (root / "after.py").write_text("x = 1\n")  # still watching
    w.collect(lambda b: root / "after.py" in b.changed)


def test_a_burst_beyond_the_bound_becomes_one_rescan(root, watch):
    w = watch(max_pending=200)
    for i in range(1000):
        (root / f"m{i}.py").write_text("x = 1\n")
    batch = w.collect(lambda b: b.rescan)
    assert len(batch.changed) <= 200
    found = set(w.watcher.walk(since=batch.since))
    assert len(found) == 1000


def test_burst_of_thousands_of_events_keeps_up(root, watch, capsys):
    w = watch()
    n = 3000
    start = time.monotonic()
    for i in range(n):
        (root / f"m{i}.py").write_text("x = 1\n")
    written = time.monotonic() - start
    seen: set[Path] = set()
    # A hang bound, not a speed claim: how soon after the last write is printed (a figure).
    batch = w.collect(lambda b: len(b.changed) + (n if b.rescan else 0) >= n, timeout=written + 60)
    lag = time.monotonic() - start - written
    seen = batch.changed
    with capsys.disabled():
        print(f"\nwatch burst: {n} files written in {written:.2f}s, all reported "
              f"{lag:.2f}s after the last write ({w.watcher.stats['events']} events, "
              f"{w.watcher.stats['batches']} batches, rescan={batch.rescan})")  # fmt: skip
    assert batch.rescan or len(seen) == n


def test_unreadable_folders_are_survived(root, watch, monkeypatch):
    """A folder the user may not read. Root reads everything, so when the tests run as root the
    kernel's answer is simulated (named as such): inotify_add_watch and scandir fail with EACCES
    for that folder, exactly as they do for an unprivileged user."""
    (root / "locked").mkdir()
    (root / "locked" / "secret.py").write_text("x = 1\n")
    os.chmod(root / "locked", 0o000)
    if os.geteuid() == 0:
        import ctypes
        import errno

        from watchdog.observers import inotify_c

        real_add, real_scandir = inotify_c.inotify_add_watch, os.scandir

        def add_watch(fd, path, mask):  # simulated: EACCES, as for a non-root user
            if b"locked" in path:
                ctypes.set_errno(errno.EACCES)
                return -1
            return real_add(fd, path, mask)

        def scandir(path="."):
            if "locked" in os.fsdecode(path):
                raise PermissionError(errno.EACCES, "Permission denied", path)
            return real_scandir(path)

        monkeypatch.setattr(inotify_c, "inotify_add_watch", add_watch)
        monkeypatch.setattr(os, "scandir", scandir)
    try:
        w = watch()
        (root / "ok.py").write_text("x = 1\n")
        w.collect(lambda b: root / "ok.py" in b.changed)
        assert sorted(p.name for p in w.watcher.walk()) == ["ok.py"]
        assert w.watcher._observer.is_alive()
    finally:
        os.chmod(root / "locked", 0o755)
