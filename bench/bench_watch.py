"""Benchmark: how soon the workspace watcher reports what was written, against bare watchdog.

The speed claims the watcher's tests used to make (a burst of 3,000 files reported within 5 s of
the last write; a checkout's changed file within 2 s, of which the watcher is the part measured
here) are figures here, not assertions: the tests wait for the event with a hang bound. In each of
``--rounds`` rounds (default 5), two folders get the same writes, one after the other:
  - a bare watchdog ``Observer`` whose handler only notes the paths (the baseline: what the
    kernel and watchdog cost on this machine now);
  - trnlens's ``WorkspaceWatcher`` (ignore rules, ``git check-ignore``, the debounce, batches).
Two cases: a burst of ``--files`` new Python files (default 3,000) and a single changed file.
The figure is the time from the last write until every path was reported: the median over the
rounds with its min-max, and the ratio to the baseline as the median of the per-round ratios, so
that a slow spell of this shared machine weighs on both alike. The watcher's figure includes its
debounce (``debounce_s``, printed), a wait by design: the ratio is of what it adds beyond that.
The baseline for one file is well under a millisecond, so that ratio is rough (see its range).
Run: .venv/bin/python bench/bench_watch.py [--files N] [--rounds N]
``--quick``: one round, a burst of 20 files, to show the bench runs to its end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from trnlens.watch import Batch, WorkspaceWatcher
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

TIMEOUT_S = 120


class Seen:
    """Paths reported so far, and an event set once all the expected ones are in."""

    def __init__(self, expected: set[Path]):
        self.expected = set(expected)
        self.paths: set[Path] = set()
        self.done = threading.Event()
        self.lock = threading.Lock()

    def add(self, paths: set[Path]) -> None:
        with self.lock:
            self.paths |= paths & self.expected
            if self.paths == self.expected:
                self.done.set()


class _Bare(FileSystemEventHandler):
    def __init__(self, seen: Seen):
        self.seen = seen

    def on_any_event(self, event: FileSystemEvent) -> None:
        self.seen.add({Path(os.fsdecode(event.src_path))})


def bare(root: Path, case: Case) -> float:
    """The baseline: watchdog alone, noting every path it reports."""
    seen = Seen(case.paths(root))
    observer = Observer()
    observer.schedule(_Bare(seen), str(root), recursive=True)
    observer.start()
    try:
        return _time(seen, root, case)
    finally:
        observer.stop()
        observer.join()


def watcher(root: Path, case: Case) -> float:
    seen = Seen(case.paths(root))
    watching: WorkspaceWatcher | None = None

    def on_batch(batch: Batch) -> None:
        seen.add(set(batch.changed))
        if batch.rescan and watching is not None:  # too many events: the watcher walks instead
            seen.add(set(watching.walk(since=batch.since)))

    watching = WorkspaceWatcher(root, on_batch).start()
    try:
        return _time(seen, root, case)
    finally:
        watching.stop()


def _time(seen: Seen, root: Path, case: Case) -> float:
    case.write(root)
    last = time.monotonic()
    if not seen.done.wait(TIMEOUT_S):
        raise TimeoutError(f"{len(seen.expected - seen.paths)} paths never reported")
    return time.monotonic() - last


class Case:
    """Python files written into a folder that holds one ``model.py`` already."""

    def __init__(self, name: str, names: list[str], goal_s: float):
        self.name = name
        self.names = names
        self.goal_s = goal_s  # what the tests used to assert

    def paths(self, root: Path) -> set[Path]:
        return {root / n for n in self.names}

    def write(self, root: Path) -> None:
        for n in self.names:
            (root / n).write_text("x = 2\n")


def measure(case: Case, rounds: int) -> None:
    runs = (("watchdog (baseline)", bare), ("trnlens watcher", watcher))
    figures: dict[str, list[float]] = {name: [] for name, _ in runs}
    debounce = WorkspaceWatcher(tempfile.gettempdir(), lambda batch: None).debounce_s
    ratios = []
    for _ in range(rounds):
        mine = []
        for name, run in runs:
            with tempfile.TemporaryDirectory(prefix="trnlens-bench-watch-") as folder:
                root = Path(folder).resolve()
                (root / "model.py").write_text("x = 1\n")
                mine.append(run(root, case))
            figures[name].append(mine[-1])
        # beyond the debounce (a wait by design): what the watcher's own work adds
        ratios.append((mine[1] - debounce) / mine[0] if mine[0] else float("inf"))
    print(f"\n{case.name}: from the last write until every path was reported ({rounds} rounds)")
    for name, values in figures.items():
        print(f"  {name:<20} median {statistics.median(values):.3f} s "
              f"(min {min(values):.3f}, max {max(values):.3f})")  # fmt: skip
    print(
        f"  the watcher less its {debounce} s debounce, to the baseline: median "
        f"{statistics.median(ratios):.1f}x (min {min(ratios):.1f}x, max {max(ratios):.1f}x)"
    )
    worst = max(figures["trnlens watcher"])
    print(
        f"  goal: every path within {case.goal_s:g} s of the last write: "
        f"{'met' if worst <= case.goal_s else 'NOT met'} (slowest round {worst:.3f} s)"
    )


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, a burst of 20 files")
    parser.add_argument("--files", type=int, default=20 if quick else 3000)
    parser.add_argument("--rounds", type=int, default=1 if quick else 5)
    args = parser.parse_args()
    probe = WorkspaceWatcher(tempfile.gettempdir(), lambda batch: None)  # not started
    print(
        f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} (1 min); the watcher's "
        f"debounce {probe.debounce_s} s, at most {probe.max_delay_s} s after a first event"
    )
    files = [f"m{i}.py" for i in range(args.files)]
    measure(Case(f"a burst of {args.files} new files", files, 5.0), args.rounds)
    measure(Case("one changed file (a checkout's)", ["model.py"], 2.0), args.rounds)


if __name__ == "__main__":
    main()
