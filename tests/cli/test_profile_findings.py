"""`trnlens profile` on a training step: mode auto runs it as written, the table lists the measured
findings, and --format json carries them (schema-valid)."""

from __future__ import annotations

import json

import jsonschema
from trnlens.results import schema

from tests.cli.conftest import trnlens

FAST = ("--warmup", "1", "--steps", "2", "--repeats", "3")
STEP = """import torch
from torch import nn


def step_inputs():
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    return (model, opt, torch.randn(8, 16), torch.randn(8, 4))


# trnlens: inputs=step_inputs
def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss
"""


def test_a_training_step_profiles_as_written_with_its_findings(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "train.py").write_text(STEP)
    done = trnlens("profile", "train.py::train_step", *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "as-written" in out
    assert "mode as-written: auto: calls loss.backward() at train.py:15 (a training step)" in out
    assert "Findings (measured in this run; times: shares of the " in out
    row = next(line for line in out.splitlines() if "optimizer-single-tensor " in line)
    assert row.split()[0] == "train.py:16"
    assert "Launch:" in out

    done = trnlens("profile", "train.py::train_step", *FAST, "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    jsonschema.validate(result, schema())
    found = {f["id"]: f for f in result["findings"]}
    finding = found["optimizer-single-tensor"]
    assert (finding["line"], finding["fix"]) == (16, "foreach")
    # A step this small (a 16x4 linear on 8 rows) is launch-bound, and is reported as such.
    assert set(found) <= {"optimizer-single-tensor", "launch-bound"}
