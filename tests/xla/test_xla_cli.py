"""`trnlens profile --backend xla --python <the torch-xla venv>` as a user runs it."""

from __future__ import annotations

import json
import shutil

import jsonschema
from trnlens.results import schema

from tests.cli.conftest import trnlens
from tests.xla.test_xla_agent import FIXTURE

FAST = ("--warmup", "2", "--steps", "3", "--repeats", "3")


def test_cli_says_the_step_recompiles_every_step_at_its_line(xla_python, tmp_path, monkeypatch):
    shutil.copy(FIXTURE, tmp_path / "steps.py")
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # torch 2.8's torch.distributed.nn makes a temporary directory at import that only a clean
    # interpreter exit removes, and the CLI ends its agent: give it a folder of the test's own.
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    done = trnlens("profile", "steps.py::growing", "--backend", "xla", "--python",
                   str(xla_python), *FAST, cwd=tmp_path, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "xla: xla:0 (PJRT CPU)" in out and "time basis: host" in out
    assert "XLA (PJRT CPU): 1 graph(s)/step · RECOMPILES EVERY STEP" in out
    assert "steps.py:21" in out and "Recompilations" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("measured"))
    assert "shape" in row and "steps.py:21" in row
    stored = next((tmp_path / ".trnlens" / "artifacts").iterdir()) / "result.json"
    result = json.loads(stored.read_text())
    jsonschema.validate(result, schema())
    assert result["xla"]["recompiles_every_step"] is True
