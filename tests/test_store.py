"""The store: atomic runs in SQLite + artifacts, recovery after a kill, the size cap."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trnlens.results import SchemaMismatch
from trnlens.store import Store

WRITER = r"""
import json, sys
from trnlens.store import Store
sys.path.insert(0, {tests!r})
from test_store import fake_result
store = Store({root!r})
for i in range({start}, {start} + 100000):
    result = fake_result(i)
    (store.staging_dir() / result["run_id"]).mkdir(parents=True, exist_ok=True)
    (store.staging_dir() / result["run_id"] / "trace.json").write_text("x" * 20000)
    store.add(result)
    print(result["run_id"], flush=True)
"""


def fake_result(i: int, path: str = "model.py", qualname: str = "f", **extra) -> dict:
    run_id = f"20260101T{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}-{i:08x}"
    return {
        "schema_version": 1, "run_id": run_id, "created_at": f"2026-01-01T00:00:{i % 60:02d}",
        "function": {"path": path, "qualname": qualname, "source_hash": "sha256:x",
                     "unsaved": False, "line": 1, "end_line": 2},
        "variant": {"label": qualname, "kind": "function", "source_hash": None},
        "target": "local", "host": "h", "backend": "cpu", "device": "cpu", "time_basis": "cpu",
        "versions": {"python": "3", "torch": "2"}, "git_commit": None, "mode": "inference",
        "inputs": {"source": "defaults", "args": [], "kwargs": {}}, "warmup": 1, "steps": 1,
        "dispatches_per_step": 6, "wall_time_per_step_us": 10.0, "cpu_time_per_step_us": 9.0,
        "device_time_per_step_us": 8.0 + i, "peak_memory_bytes": None, "ops": [], "lines": [],
        "timing": {"median_us": 5.0, "min_us": 4.0, "max_us": 6.0, "repeats": 3},
        "artifacts": [{"kind": "chrome_trace", "path": "trace.json"}], "warnings": [],
        "error": None, **extra,
    }  # fmt: skip


def test_layout_and_round_trip(tmp_path):
    with Store(tmp_path) as store:
        assert (tmp_path / ".trnlens" / ".gitignore").read_text() == "*\n"
        result = fake_result(1)
        store.add(result)
        assert store.get(result["run_id"]) == result
        stored = json.loads((store.artifacts / result["run_id"] / "result.json").read_text())
        assert stored == result
        assert store.latest("model.py", "f")["run_id"] == result["run_id"]
        assert store.latest("model.py", "g") is None
    journal = sqlite3.connect(tmp_path / ".trnlens" / "runs.sqlite").execute("PRAGMA journal_mode")
    assert journal.fetchone()[0] == "wal"


def test_history_is_newest_first_and_filtered(tmp_path):
    with Store(tmp_path) as store:
        for i in range(5):
            store.add(fake_result(i, qualname="f" if i % 2 == 0 else "g"))
        assert [r["run_id"] for r in store.runs("model.py", "f")] == [
            fake_result(i)["run_id"] for i in (4, 2, 0)
        ]
        assert store.clear("model.py") == 5
        assert store.runs() == []


def test_refuses_foreign_results_and_keeps_earlier_runs(tmp_path):
    with Store(tmp_path) as store:
        store.add(fake_result(1))
        with pytest.raises(SchemaMismatch):
            store.add({**fake_result(2), "schema_version": 99})
        with pytest.raises(SchemaMismatch):
            store.add({"run_id": "x"})
        assert len(store.runs()) == 1


def test_size_cap_prunes_oldest_artifacts_but_keeps_history(tmp_path):
    with Store(tmp_path, cap_bytes=50_000) as store:
        for i in range(5):
            staged = store.staging_dir() / fake_result(i)["run_id"]
            staged.mkdir(parents=True)
            (staged / "trace.json").write_bytes(b"x" * 20_000)
            store.add(fake_result(i))
        assert store.artifacts_size() <= 50_000
        assert len(store.runs()) == 5  # history survives pruning
        oldest, newest = fake_result(0)["run_id"], fake_result(4)["run_id"]
        assert not (store.artifacts / oldest / "trace.json").exists()
        assert (store.artifacts / oldest / "result.json").exists()
        assert (store.artifacts / newest / "trace.json").exists()


def test_recovers_a_run_whose_row_was_never_written(tmp_path):
    with Store(tmp_path) as store:
        orphan = fake_result(7)
        directory = store.artifacts / orphan["run_id"]
        directory.mkdir()
        (directory / "result.json").write_text(json.dumps(orphan))
        (store.artifacts / "garbage").mkdir()  # incomplete: no result.json, left alone
    with Store(tmp_path) as store:
        assert store.get(orphan["run_id"]) == orphan
        assert (store.artifacts / "garbage").exists()


def test_survives_sigkill_mid_write(tmp_path):
    """Kill a writer at arbitrary moments; every run it reported stored must still be there.

    The kill comes a random moment after the writer confirmed some runs (not after a fixed
    delay: on a busy machine the writer may not even have started by then)."""
    confirmed: list[str] = []
    rng = random.Random(13)
    for round_ in range(6):
        # Each round numbers its runs apart from the others: run ids stay unique.
        script = WRITER.format(
            tests=str(Path(__file__).parent), root=str(tmp_path), start=round_ * 100_000
        )
        writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(2 + round_):
            confirmed.append(writer.stdout.readline().strip())
        time.sleep(rng.uniform(0, 0.03))  # somewhere inside a later write
        os.kill(writer.pid, signal.SIGKILL)
        out, _ = writer.communicate()
        confirmed.extend(out.split())
        assert writer.returncode == -signal.SIGKILL
        with Store(tmp_path) as store:
            assert store.recovered is None
            check = store._db.execute("PRAGMA integrity_check").fetchone()[0]
            assert check == "ok"
            stored = {r["run_id"] for r in store.runs(limit=1_000_000)}
            missing = [run_id for run_id in confirmed if run_id not in stored]
            assert not missing, f"lost {len(missing)} confirmed runs"
            for run_id in confirmed[-3:]:
                assert json.loads((store.artifacts / run_id / "result.json").read_text())
    assert len(confirmed) >= 27, len(confirmed)
