"""A run's artifacts as one archive on the agent's connection: only the run's own directory,
removed once sent; too big is left for the target to fetch its own way."""

from __future__ import annotations

import base64
import io
import tarfile

from trnlens.agent.artifacts import archive


def _run_dir(tmp_path):
    run_dir = tmp_path / "runs" / "abc"
    (run_dir / "artifacts" / "rank-1").mkdir(parents=True)
    (run_dir / "artifacts" / "trace.json").write_text("{}")
    (run_dir / "artifacts" / "rank-1" / "trace.json").write_text("[]")
    return run_dir


def test_the_last_runs_artifacts_come_as_one_archive_and_the_run_is_removed(tmp_path):
    run_dir = _run_dir(tmp_path)
    data, why = archive.answer(str(run_dir), str(run_dir / "artifacts"))
    assert why is None and data is not None
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(data)), mode="r:gz") as tar:
        names = sorted(m.name for m in tar.getmembers() if m.isfile())
    assert names == ["rank-1/trace.json", "trace.json"]
    assert not run_dir.exists()


def test_another_directory_is_neither_sent_nor_removed(tmp_path):
    run_dir = _run_dir(tmp_path)
    other = tmp_path / "runs" / "other"
    assert archive.answer(str(tmp_path), str(run_dir / "artifacts")) == (
        None, "not the last run's directory",
    )  # fmt: skip
    assert archive.answer(str(other), None) == (None, "not the last run's directory")
    assert run_dir.exists()


def test_too_big_is_left_where_it_is(tmp_path, monkeypatch):
    monkeypatch.setattr(archive, "ARTIFACTS_MAX_BYTES", 10)
    run_dir = _run_dir(tmp_path)
    data, why = archive.answer(str(run_dir), str(run_dir / "artifacts"))
    assert data is None and why == "the artifacts are over 10 bytes compressed"
    assert (run_dir / "artifacts" / "trace.json").exists()
