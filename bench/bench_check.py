"""Benchmark: `trnlens check` against ruff (E, F, W) on the same tree, measured in one run.

The tree: every PyTorch modeling file of the pinned transformers wheel (a dev dependency, read as
text and copied into a temporary folder; never imported). Timed as fresh processes, as a user or
pre-commit runs them:
  - ruff check --select E,F,W --no-cache (the baseline);
  - trnlens check as it was at ``--against REV`` (default: the merge base with main), extracted
    from git into a temporary folder: the "before" figure;
  - trnlens check now: one process (``--jobs 1``), every core (the default), each with an empty
    cache, then a second run over the unchanged tree (answered from the cache).
Goals: at most 3x ruff's time cold; the second run at most 0.5 s.
Run: .venv/bin/python bench/bench_check.py [--against REV]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")


def copy_tree(root: Path) -> tuple[int, int]:
    dist = importlib.metadata.distribution("transformers")
    files = lines = 0
    for f in dist.files or []:
        name = str(f)
        if name.startswith("transformers/models/") and f.name.startswith("modeling_"):
            if name.endswith(".py"):
                text = dist.locate_file(f).read_text(encoding="utf-8")
                target = root / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                files += 1
                lines += text.count("\n")
    return files, lines


def extract(rev: str, into: Path) -> Path:
    """trnlens's server/ at ``rev``, importable from ``into/server``."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "server"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "server"


def merge_base() -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), "merge-base", "HEAD", "main"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and CPU seconds (user + system, the process and its workers): on a shared
    machine the CPU figure shows the work done whatever the other processes take."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default=None, help="git revision of the 'before' figure")
    args = parser.parse_args()
    against = args.against or merge_base()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tree = tmp / "tree"
        n_files, n_lines = copy_tree(tree)
        before = extract(against, tmp / "before")
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache")}
        old_env = {**env, "PYTHONPATH": str(before)}
        trn = [sys.executable, "-m", "trnlens", "check", str(tree), "--format", "json"]
        load = os.getloadavg()[0]
        ruff = timed([str(RUFF), "check", "--isolated", "--no-cache", "--select", "E,F,W",
                      "--exit-zero", "-q", str(tree)], env)  # fmt: skip
        old = timed(trn, old_env)
        one = timed([*trn, "--jobs", "1", "--no-cache"], env)
        shutil.rmtree(tmp / "cache", ignore_errors=True)
        every = timed(trn, env)  # an empty cache: fills it
        warm = min(timed(trn, env) for _ in range(3))  # the fastest wall, with its CPU
        load = max(load, os.getloadavg()[0])
    rows = [
        ("ruff check --select E,F,W --no-cache (baseline)", ruff),
        (f"trnlens check before ({against[:10]})", old),
        ("trnlens check --jobs 1, no cache", one),
        (f"trnlens check, {os.cpu_count()} jobs, empty cache", every),
        ("trnlens check again, unchanged tree (best of 3)", warm),
    ]
    print(f"trnlens check vs ruff: transformers {importlib.metadata.version('transformers')}, "
          f"{n_files} modeling files, {n_lines:,} lines; load up to {load:.1f} on "
          f"{os.cpu_count()} cores")  # fmt: skip
    print(
        f"  {'what':50s} {'wall s':>7s} {'/ ruff':>7s} {'/ before':>8s} {'CPU s':>7s} "
        f"{'/ ruff':>7s} {'/ before':>8s}"
    )
    for label, (wall, cpu) in rows:
        print(
            f"  {label:50s} {wall:7.2f} {wall / ruff[0]:6.2f}x {wall / old[0]:7.2f}x "
            f"{cpu:7.2f} {cpu / ruff[1]:6.2f}x {cpu / old[1]:7.2f}x"
        )
    met = "met" if every[0] <= 3 * ruff[0] else "NOT met"
    print(f"  cold vs ruff (wall): {every[0] / ruff[0]:.2f}x (goal <= 3x: {met})")
    met = "met" if warm[0] <= 0.5 else "NOT met"
    print(f"  second run: {warm[0]:.2f} s wall, {warm[1]:.2f} s CPU (goal <= 0.5 s: {met})")


if __name__ == "__main__":
    main()
