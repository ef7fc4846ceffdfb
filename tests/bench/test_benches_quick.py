"""Every bench in bench/ runs to its end (issue 44): each one's ``--quick`` mode (every part once,
tiny sizes) as a fresh process from the repository's root, as a user starts it. A bench must exit
0 having printed its table's last lines; its figures are never checked (benches print figures,
tests check that they can be printed). A bench that needs what is missing here fails in its quick
mode: sshd and the torch-xla venv come as the other tests get them (skipped here, failed in CI)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.targets.conftest import needs_sshd
from tests.xla.conftest import xla_python  # noqa: F401 - the fixture of the xla bench's test

REPO = Path(__file__).resolve().parents[2]
HANG_S = 900  # a bound on a hang, not a goal: the slowest quick run takes minutes when loaded

# bench script -> what it prints only once every part has run (its table's last lines)
ENDINGS = {
    "bench_analysis.py": ("re-analysis after edit p95 (5 edits)", "p95 / goal (50 ms)"),
    "bench_attribution.py": ("full vs lines: x", "4 layers (hidden 64)", "by field: frames"),
    "bench_backward.py": ("with / without: tables",),
    "bench_check.py": ("5 modeling files", "trnlens check before (HEAD)", "findings: "),
    "bench_collectives.py": ("one label inside a profiled step", "with / without, wall_s"),
    "bench_compare.py": ("loaded (1 busy)", "  before  ", "goal: at least 95%"),
    "bench_compile.py": ("with_break", "collection / profile", "load average after"),
    "bench_findings.py": ("variant ms (baseline)", "train.py::tiny_ops"),
    "bench_library_rules.py": ("tiny Llama forward (9 files)", "5 modeling files"),
    "bench_load.py": ("3 files of 100 lines open", "p95 ratio", "growth: first half"),
    "bench_memory.py": ("with / without: variant",),
    "bench_lsp.py": ("p95 after/before", "handler + serialisation in process", "server RSS after"),
    "bench_profile.py": ("compiled speed-up (range)", "small (4, 64, 256)"),
    "bench_ranks.py": ("2 rank(s): request wall", "2 ranks / 1 rank, overhead"),
    "bench_remote.py": ("remote, repeat (connection reused)", "(baseline)"),
    "bench_report.py": ("2 MB", "RSS ratio", "report build: two streamed passes"),
    "bench_warm.py": ("local CPU target", "remote target over ssh", "collect (artifacts over ssh)"),
    "bench_watch.py": ("a burst of 20 new files", "one changed file", "every path within 2 s"),
    "bench_xla.py": ("== rmsnorm forward", "== fine-tuning step", "whole run: hand-written"),
}
NEEDS_SSHD = {"bench_remote.py", "bench_warm.py"}
NEEDS_XLA = {"bench_xla.py"}
# Seconds each at the least (every other one takes about one): fresh processes that import torch,
# profiles, torchrun, torch.compile. Marked slow, so that ``-m "not slow"`` leaves the rest.
SLOW = {"bench_attribution.py", "bench_backward.py", "bench_collectives.py", "bench_compare.py",
        "bench_compile.py", "bench_findings.py", "bench_load.py", "bench_lsp.py", "bench_memory.py",
        "bench_profile.py", "bench_ranks.py", *NEEDS_SSHD, *NEEDS_XLA}  # fmt: skip


def run_quick(script: str) -> str:
    """``script --quick``'s output, once it exited 0; its process group is killed on a hang (and
    on any other way out of here), so that nothing it started outlives the test."""
    bench = subprocess.Popen(
        [sys.executable, f"bench/{script}", "--quick"], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = bench.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"bench/{script} --quick still running after {HANG_S} s")
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.communicate()
    said = f"bench/{script} --quick exited {bench.returncode}:\n{err[-4000:]}"
    assert bench.returncode == 0, said
    return out


def assert_ran_to_its_end(script: str, out: str) -> None:
    missing = [line for line in ENDINGS[script] if line not in out]
    assert not missing, f"bench/{script} --quick did not print {missing}:\n{out[-4000:]}"


def test_every_bench_has_its_quick_run_here():
    found = {path.name for path in (REPO / "bench").glob("bench_*.py")}
    assert found == set(ENDINGS)
    for name in found:
        assert "--quick" in (REPO / "bench" / name).read_text(), name


def marks(name: str) -> list[pytest.MarkDecorator]:
    found = [pytest.mark.slow] if name in SLOW else []
    if name in NEEDS_SSHD:
        found.append(needs_sshd)
    return found


HERE = [pytest.param(name, marks=marks(name)) for name in sorted(set(ENDINGS) - NEEDS_XLA)]


@pytest.mark.parametrize("script", HERE, ids=lambda name: name.removesuffix(".py"))
def test_a_bench_runs_to_its_end_in_quick_mode(script):
    assert_ran_to_its_end(script, run_quick(script))


@pytest.mark.slow
def test_the_xla_bench_runs_to_its_end_in_quick_mode(xla_python):  # noqa: F811
    assert_ran_to_its_end("bench_xla.py", run_quick("bench_xla.py"))
