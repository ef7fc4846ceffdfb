"""Benchmark: `trnlens check` against ruff (E, F, W) on the same tree, measured in one run.

The tree: every PyTorch modeling file of the pinned transformers wheel (a dev dependency, read as
text and copied into a temporary folder; never imported). Timed as fresh processes, as a user or
pre-commit runs them:
  - ruff check --select E,F,W --no-cache (the baseline);
  - trnlens check as it was at ``--against REV`` (default: the merge base with main), extracted
    from git into a temporary folder: the "before" figure;
  - trnlens check now on every core (the default) with an empty cache, then a second run over the
    unchanged tree (answered from the cache);
  - once, trnlens check in one process (``--jobs 1``), without a cache.
trnlens runs with a bytecode cache (in the temporary folder: an installed trnlens has its
``.pyc`` files, whatever ``PYTHONDONTWRITEBYTECODE`` this shell sets), filled by one untimed run of
each command before the rounds, which also reads the tree into the OS's file cache for all of
them. The first three are measured in ``--rounds`` rounds (default 5), one after the other within a
round, so that a slow spell of this shared machine weighs on all of them alike: each figure is the
median over the rounds with its min-max, and each ratio the median of the per-round ratios. A
plain warning says when ruff's own times spread by more than 25%: ratios from such a run are
rough. Goals: at most 1.5x ruff's wall time cold (issue 44; was 3x); the second run at most
0.5 s. The findings of the cold run are compared with the before figure's: identical, or what
was added and removed (a speed change must leave them identical; a rule change says what it
changed).
Run: .venv/bin/python bench/bench_check.py [--against REV] [--rounds N]
``--quick``: one round on 5 modeling files, against HEAD, to show the bench runs to its end.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")


def copy_tree(root: Path, limit: int | None = None) -> tuple[int, int]:
    """The modeling files (the first ``limit`` of them) copied under ``root``."""
    dist = importlib.metadata.distribution("transformers")
    files = lines = 0
    for f in dist.files or []:
        name = str(f)
        if name.startswith("transformers/models/") and f.name.startswith("modeling_"):
            if name.endswith(".py") and files != limit:
                text = Path(str(dist.locate_file(f))).read_text(encoding="utf-8")
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
    done = subprocess.run(["git", "-C", str(REPO), "merge-base", "HEAD", "main"],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"no merge base with main ({done.stderr.strip()}): pass --against REV")
    return done.stdout.strip()


def default_against(quick: bool) -> str:
    """The 'before' revision when none is named: the merge base with main; in quick mode HEAD,
    which every clone has (a fresh clone of a branch, or a CI checkout, may have no main)."""
    return "HEAD" if quick else merge_base()


OUTPUTS: dict[str, bytes] = {}  # the first output of each trnlens command, compared below


def timed(command: list[str], env: dict[str, str], key: str = "") -> tuple[float, float]:
    """Wall seconds, and CPU seconds (user + system, the process and its workers): on a shared
    machine the CPU figure shows the work done whatever the other processes take. The output
    is kept under ``key`` (the first time), to compare the findings."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if key:
        OUTPUTS.setdefault(key, done.stdout)
    return elapsed, cpu


def compare_findings(before: bytes, after: bytes) -> str:
    """Whether the two JSON outputs are identical; else what each has that the other lacks."""
    if before == after:
        return "identical to the before figure's (byte for byte)"
    old = {json.dumps(f, sort_keys=True) for f in json.loads(before)}
    new = {json.dumps(f, sort_keys=True) for f in json.loads(after)}

    def said(found: set[str]) -> str:
        return ", ".join(
            f"{f['code']} {Path(f['filename']).name}:{f['location']['row']}"
            for f in map(json.loads, sorted(found))
        )

    return (
        f"{len(new - old)} added ({said(new - old) or '-'}), "
        f"{len(old - new)} removed ({said(old - new) or '-'}) against the before figure's"
    )


COLD_GOAL = 1.5  # the cold run's wall time over ruff's, at most (issue 44)
NOISY_SPREAD = 0.25  # ruff's (max - min) / median above which the run is called noisy


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round on 5 files")
    parser.add_argument("--against", default=None, help="git revision of the 'before' figure")
    parser.add_argument("--rounds", type=int, default=1 if quick else 5, help="rounds")
    args = parser.parse_args()
    against = args.against or default_against(quick)
    if not RUFF.exists():
        raise SystemExit(f"no ruff at {RUFF} (the dev dependencies: bash scripts/setup.sh)")
    rounds: list[dict[str, tuple[float, float]]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        tree = tmp / "tree"
        n_files, n_lines = copy_tree(tree, 5 if quick else None)
        before = extract(against, tmp / "before")
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # start-up as installed: from bytecode
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")  # never written into the checkout
        old_env = {**env, "PYTHONPATH": str(before)}
        trn = [sys.executable, "-m", "trnlens", "check", str(tree), "--format", "json"]
        ruff_command = [str(RUFF), "check", "--isolated", "--no-cache", "--select", "E,F,W",
                        "--exit-zero", "-q", str(tree)]  # fmt: skip
        # Untimed: fills both trnlens versions' bytecode caches, and the OS's file cache.
        timed(ruff_command, env)
        timed([*trn, "--no-cache"], old_env)
        timed([*trn, "--no-cache"], env)
        load = os.getloadavg()[0]
        for _ in range(args.rounds):
            shutil.rmtree(tmp / "cache", ignore_errors=True)
            measured = {"ruff": timed(ruff_command, env), "before": timed(trn, old_env, "before")}
            shutil.rmtree(tmp / "cache", ignore_errors=True)
            measured["cold"] = timed(trn, env, "cold")  # an empty cache: fills it
            measured["warm"] = timed(trn, env)
            rounds.append(measured)
            load = max(load, os.getloadavg()[0])
        one = timed([*trn, "--jobs", "1", "--no-cache"], env)
    rows = [
        ("ruff check --select E,F,W --no-cache (baseline)", "ruff"),
        (f"trnlens check before ({against[:10]})", "before"),
        (f"trnlens check, {os.cpu_count()} jobs, empty cache", "cold"),
        ("trnlens check again, unchanged tree", "warm"),
    ]
    print(f"trnlens check vs ruff: transformers {importlib.metadata.version('transformers')}, "
          f"{n_files} modeling files, {n_lines:,} lines; {len(rounds)} rounds; load up to "
          f"{load:.1f} on {os.cpu_count()} cores")  # fmt: skip
    print("  wall and CPU seconds: median (min-max) over the rounds; ratios: median of the "
          "per-round ratios")  # fmt: skip
    print(f"  {'what':50s} {'wall s':>18s} {'/ ruff':>7s} {'/ before':>8s} {'CPU s':>18s} "
          f"{'/ ruff':>7s}")  # fmt: skip

    def ratio(key: str, to: str, which: int) -> float:
        return statistics.median(r[key][which] / r[to][which] for r in rounds)

    for label, key in rows:
        walls = [r[key][0] for r in rounds]
        cpus = [r[key][1] for r in rounds]
        print(f"  {label:50s} {summary(walls):>18s} {ratio(key, 'ruff', 0):6.2f}x "
              f"{ratio(key, 'before', 0):7.2f}x {summary(cpus):>18s} "
              f"{ratio(key, 'ruff', 1):6.2f}x")  # fmt: skip
    print(f"  {'trnlens check --jobs 1, no cache (one run)':50s} {one[0]:18.2f} "
          f"{'':7s} {'':8s} {one[1]:18.2f}")  # fmt: skip
    cold = [r["cold"][0] / r["ruff"][0] for r in rounds]
    met = "met" if statistics.median(cold) <= COLD_GOAL else "NOT met"
    print(f"  cold vs ruff (wall): {summary(cold).strip()}x (goal <= {COLD_GOAL}x: {met})")
    warm = statistics.median(r["warm"][0] for r in rounds)
    met = "met" if warm <= 0.5 else "NOT met"
    print(f"  second run: {warm:.2f} s wall, median (goal <= 0.5 s: {met})")
    print(f"  findings: {compare_findings(OUTPUTS['before'], OUTPUTS['cold'])}")
    ruffs = [r["ruff"][0] for r in rounds]
    spread = (max(ruffs) - min(ruffs)) / statistics.median(ruffs)
    if len(rounds) > 1 and spread > NOISY_SPREAD:
        print(f"  warning: ruff's own time spread by {spread:.0%} over the rounds: this machine "
              "was busy, and the ratios above are rough")  # fmt: skip


if __name__ == "__main__":
    main()
