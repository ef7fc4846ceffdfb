"""``trnlens history`` and ``trnlens diff`` as a user runs them (a subprocess), on stored runs."""

from __future__ import annotations

import json
from pathlib import Path

from trnlens.cli import exitcodes
from trnlens.store import Store

from ..test_store import fake_result
from .conftest import trnlens

SOURCE = "import torch\n\n\ndef f(x):\n    return x.pow(2).mean(-1)\n"


def stored(root: Path, i: int, median: float, low: float, high: float, **extra) -> dict:
    result = fake_result(i, **extra)
    result["timing"] = {"median_us": median, "min_us": low, "max_us": high, "repeats": 20}
    result["ops"] = [{"name": "aten::pow", "calls": 1, "self_cpu_us": median / 2,
                      "self_device_us": median / 2, "cpu_total_us": median / 2,
                      "device_total_us": median / 2, "input_shapes": [[[4, 8]]]}]  # fmt: skip
    result["lines"] = [{"path": "model.py", "line": 5, "cpu_us": median, "device_us": median,
                        "dispatches": 2}]  # fmt: skip
    with Store(root) as store:
        store.add(result)
    return result


def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "model.py").write_text(SOURCE)
    return tmp_path


def test_history_table_and_json(tmp_path):
    root = project(tmp_path)
    a = stored(root, 1, 100.0, 99.0, 101.0)
    stored(root, 2, 150.0, 149.0, 152.0, backend="cuda")  # not comparable with either
    c = stored(root, 3, 58.0, 57.0, 59.0)
    done = trnlens("history", "model.py::f", cwd=root)
    assert done.returncode == exitcodes.OK, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "model.py::f"
    newest = next(line for line in lines if c["run_id"] in line)
    assert "−42%" in newest and "stale" in newest  # fake runs' hash is not the file's
    assert "cuda" in done.stdout
    data = json.loads(trnlens("history", "model.py::f", "--format", "json", cwd=root).stdout)
    assert [r["run_id"] for r in data["runs"]][::2] == [c["run_id"], a["run_id"]]
    assert data["runs"][0]["change"]["base"] == a["run_id"]
    assert data["runs"][1]["change"] is None


def test_history_of_an_unknown_function_and_bad_specs(tmp_path):
    root = project(tmp_path)
    done = trnlens("history", "model.py::g", cwd=root)
    assert done.returncode == exitcodes.OK and "no runs stored" in done.stdout
    assert trnlens("history", "model.py", cwd=root).returncode == exitcodes.USAGE


def test_diff_fails_above_the_bound_only_beyond_the_spread(tmp_path):
    root = project(tmp_path)
    a = stored(root, 1, 100.0, 98.0, 102.0)
    slow = stored(root, 2, 150.0, 148.0, 153.0)
    noisy = stored(root, 3, 125.0, 70.0, 180.0)
    done = trnlens("diff", a["run_id"], slow["run_id"], "--fail-above", "20", cwd=root)
    assert done.returncode == exitcodes.FINDINGS, done.stdout + done.stderr
    assert "+50%" in done.stdout and "REGRESSION" in done.stdout
    assert "aten::pow" in done.stdout and "model.py:5" in done.stdout
    # The same slowdown under a looser bound passes; so does a noisy pair within its spread.
    assert trnlens("diff", a["run_id"], slow["run_id"], "--fail-above", "60",
                   cwd=root).returncode == exitcodes.OK  # fmt: skip
    done = trnlens("diff", a["run_id"], noisy["run_id"], "--fail-above", "10", cwd=root)
    assert (
        done.returncode == exitcodes.OK and "+25%, but a run's timing was unreliable" in done.stdout
    )
    # Without --fail-above the verdict is printed, the exit code stays 0.
    assert trnlens("diff", a["run_id"], slow["run_id"], cwd=root).returncode == exitcodes.OK


def test_diff_json_prefixes_and_result_files(tmp_path):
    root = project(tmp_path)
    a = stored(root, 1, 100.0, 98.0, 102.0)
    b = stored(root, 2, 90.0, 88.0, 92.0)
    result_file = root / ".trnlens" / "artifacts" / b["run_id"] / "result.json"
    done = trnlens("diff", a["run_id"], str(result_file), "--format", "json", cwd=root)
    report = json.loads(done.stdout)
    assert report["change"]["change_pct"] == -10.0 and not report["regression"]
    assert report["ops"][0]["self_device_us"]["delta"] == -5.0
    assert report["lines"][0]["device_us"]["pct"] == -10.0
    done = trnlens("diff", "2026", b["run_id"], cwd=root)
    assert done.returncode == exitcodes.USAGE and "ambiguous" in done.stderr
    done = trnlens("diff", "nope", b["run_id"], cwd=root)
    assert done.returncode == exitcodes.USAGE and "no run 'nope'" in done.stderr


def test_unchanged_runs_with_overlapping_spreads_read_no_change(tmp_path):
    root = project(tmp_path)
    a = stored(root, 1, 10_000.0, 9_000.0, 80_000.0)  # a burst of load in one call
    b = stored(root, 2, 60_108.5, 50_000.0, 70_000.0)  # +501 %, within a's spread
    done = trnlens("history", "model.py::f", cwd=root)
    newest = next(line for line in done.stdout.splitlines() if b["run_id"] in line)
    # a burst of load: a's timing is unreliable, so +501% is "noisy", never "no change"
    assert "+501% noisy" in newest and "REGRESSION" not in done.stdout
    done = trnlens("diff", b["run_id"], a["run_id"], "--fail-above", "10", cwd=root)
    assert done.returncode == exitcodes.OK, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    verdict = next(line for line in lines if line.startswith("verdict on the "))
    assert verdict.startswith("verdict on the median (timing pass, no profiler): −83%, but a run")
    # The table shows the verdict's own statistic first, with units on negative changes too.
    first = next(line for line in lines if "median (timing pass, no profiler)" in line[:40])
    assert "-50.1 ms (−83%)" in first
    assert "ns" not in done.stdout
    # CPU time is labelled as CPU time: the runs' time basis is cpu.
    assert "CPU (ops)/step (profiled)" in done.stdout and "device/step" not in done.stdout


def test_diff_refuses_a_comparison_file(tmp_path):
    root = project(tmp_path)
    a = stored(root, 1, 100.0, 99.0, 101.0)
    comparison = {"schema_version": 3, "variants": [fake_result(4), fake_result(5)], "baseline": 0}
    (root / "comparison.json").write_text(json.dumps(comparison))
    done = trnlens("diff", a["run_id"], "comparison.json", cwd=root)
    assert done.returncode == exitcodes.USAGE
    assert "diff takes single runs, not a comparison (comparison.json)" in done.stderr
