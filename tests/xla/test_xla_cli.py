"""`trnlens profile --backend xla --python <the torch-xla venv>` as a user runs it."""

from __future__ import annotations

import json
import shutil

import jsonschema
from trnlens.cli.render import render_comparison
from trnlens.results import schema

from tests.cli.conftest import trnlens
from tests.xla.conftest import REPO
from tests.xla.test_xla_agent import FIXTURE
from tests.xla.test_xla_training import FIXTURE as TRAINING

FAST = ("--warmup", "2", "--steps", "3", "--repeats", "3")


def cli_env(monkeypatch, tmp_path) -> None:
    """The CLI's agent on the CPU PJRT device, one thread. torch 2.8's torch.distributed.nn
    makes a temporary directory at import that only a clean interpreter exit removes, and the
    CLI ends its agent: it gets a folder of the test's own."""
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))


def test_cli_says_the_step_recompiles_every_step_at_its_line(xla_python, tmp_path, monkeypatch):
    shutil.copy(FIXTURE, tmp_path / "steps.py")
    cli_env(monkeypatch, tmp_path)
    done = trnlens("profile", "steps.py::growing", "--backend", "xla", "--python",
                   str(xla_python), *FAST, cwd=tmp_path, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "xla: xla:0 (PJRT CPU)" in out and "time basis: host" in out
    assert "XLA (PJRT CPU): 1 graph(s)/step · RECOMPILES EVERY STEP" in out
    assert "steps.py:21" in out and "Recompilations" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("measured"))
    assert "shape" in row and "steps.py:21" in row
    assert "distinct shapes at steps.py:21: f32[4," in out  # the lengths it saw
    assert "what to do: each new length compiles a new graph: pad the varying length" in out
    stored = next((tmp_path / ".trnlens" / "artifacts").iterdir()) / "result.json"
    result = json.loads(stored.read_text())
    jsonschema.validate(result, schema())
    assert result["xla"]["recompiles_every_step"] is True
    # The report's XLA section: lanes (trace, compile, execute, transfer) and the recompilation.
    page = tmp_path / "report.html"
    done = trnlens("report", result["run_id"], "--output", str(page), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    html = page.read_text("utf-8")
    assert "XLA: 1 graph(s)/step · RECOMPILES EVERY STEP" in html
    for lane in ("trace", "compile", "execute", "transfer"):
        assert f'class="lane-{lane}"' in html
    assert "recompiled" in html and "steps.py:21" in html


def test_compare_fix_on_xla_shows_graphs_and_ir_nodes_per_variant(
    xla_python, tmp_path, monkeypatch
):
    """``compare --fix`` on the real torch-xla (issue 40, point 6): the naive RMSNorm, the
    analysis' fix (TRN001: torch.rms_norm) and the compiled original (openxla)."""
    shutil.copytree(REPO / "samples", tmp_path / "samples")
    cli_env(monkeypatch, tmp_path)
    done = trnlens("compare", "--fix", "samples/rmsnorm.py::rmsnorm_naive", "--backend", "xla",
                   "--python", str(xla_python), *FAST, "--format", "json", cwd=tmp_path,
                   timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout)
    naive, fused, compiled = data["variants"]
    assert "fixed: TRN001" in fused["variant"]["label"]
    assert compiled["variant"]["kind"] == "compiled"
    for v in (naive, fused, compiled):
        assert v["error"] is None and v["backend"] == "xla"
        assert v["xla"]["per_step"]["graphs"] == 1 and v["xla"]["compiles_in_window"] == 0
    nodes = [sum(line["ir_nodes"] for line in v["xla"]["lines"]) for v in (naive, fused)]
    assert nodes[0] > 0 and nodes[1] > 0  # torch.rms_norm decomposes on XLA: compare them
    assert all(d is not None and d < 1e-4 for d in data["max_abs_diff"])  # outputs compared
    text = render_comparison(data)
    assert "XLA (per step: graphs executed" in text and "Graphs/step" in text
    assert "Execute/step" in text


def test_cli_and_report_show_a_fine_tuning_steps_modules_and_library_lines(
    xla_python, tmp_path, monkeypatch
):
    """Before issue 40: a step with backward() ended in "internal error"; the forward that
    worked said only "282 IR nodes were made in library code"."""
    shutil.copy(TRAINING, tmp_path / "training.py")
    cli_env(monkeypatch, tmp_path)
    done = trnlens("profile", "training.py::llama_finetune", "--backend", "xla", "--python",
                   str(xla_python), *FAST, cwd=tmp_path, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "internal error" not in out
    assert "Modules (IR nodes with their callees" in out
    row = next(line for line in out.splitlines() if "model.model.layers.0.self_attn.q_proj" in line)
    assert "Linear" in row and "(" in row  # own IR nodes with the backward part in brackets
    assert "Library lines" in out and "transformers/models/llama/modeling_llama.py:" in out
    # what the step holds on the device (issue 41): the Llama's parameters and AdamW's moments
    held = next(line for line in out.splitlines() if "held on the device between steps" in line)
    assert "parameters " in held and "optimizer state " in held, held
    assert "the device's allocator: this PJRT plugin gives no allocator figures" in out
    stored = next((tmp_path / ".trnlens" / "artifacts").iterdir()) / "result.json"
    result = json.loads(stored.read_text())
    page = tmp_path / "report.html"
    done = trnlens("report", result["run_id"], "--output", str(page), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    html = page.read_text("utf-8")
    assert "Modules: IR nodes, forward and backward" in html and "self_attn" in html
    assert "Library lines: where the IR nodes were made" in html
    assert "Per line: IR nodes and ops" in html and 'data-path="training.py"' in html
    assert "the cpu backend runs ops on the host" not in html
    assert "on XLA the per-line figures are IR nodes and ops" in html
    assert "<li>held on the device between steps: parameters " in html


def compare_training_steps(xla_python, tmp_path, monkeypatch, *steps: str) -> dict:
    """``trnlens compare`` of the training fixture's steps on XLA, its JSON."""
    shutil.copy(TRAINING, tmp_path / "training.py")
    cli_env(monkeypatch, tmp_path)
    done = trnlens("compare", *(f"training.py::{step}" for step in steps), "--backend", "xla",
                   "--python", str(xla_python), *FAST, "--format", "json", cwd=tmp_path,
                   timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_compare_on_xla_the_samples_step_with_and_without_its_host_read(
    xla_python, tmp_path, monkeypatch
):
    """Issue 40: before/after on XLA from the same state, in graphs and forced executions, on
    the sample a user is pointed at (samples/xla_finetune.py: AdamW, clipping,
    ``xm.optimizer_step``); its static finding is the line the run measures."""
    shutil.copy(REPO / "samples" / "xla_finetune.py", tmp_path / "xla_finetune.py")
    cli_env(monkeypatch, tmp_path)
    check = trnlens("check", "xla_finetune.py", cwd=tmp_path)
    (finding,) = [line for line in check.stdout.splitlines() if " TRN" in line]
    read_line = int(finding.split(":")[1])
    assert (
        " TRN302 " in finding
        and "loss.item()"
        in (tmp_path / "xla_finetune.py").read_text("utf-8").splitlines()[read_line - 1]
    )
    done = trnlens("compare", "xla_finetune.py::step", "xla_finetune.py::step_logged_later",
                   "--backend", "xla", "--python", str(xla_python), *FAST, "--format", "json",
                   cwd=tmp_path, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout)
    logged, later = data["variants"]
    for v in (logged, later):
        assert v["error"] is None and v["xla"]["skipped"] == []
    assert logged["xla"]["per_step"]["graphs"] == 2 and later["xla"]["per_step"]["graphs"] == 1
    (forced,) = logged["xla"]["forced"]
    assert (forced["line"], forced["executions"]) == (read_line, 1), forced
    assert later["xla"]["forced"] == []
    assert data["max_abs_diff"][1] == 0  # the same state, the same loss: only the read differs
    text = render_comparison(data)
    xla_table = text[text.index("XLA (per step: graphs executed") :].splitlines()
    row = next(line.split() for line in xla_table if line.strip().startswith("step "))
    assert row[1] == "2" and row[-1] == "1"  # graphs per step, forced executions


def test_compare_on_xla_a_ragged_batch_unpadded_and_padded_to_a_bucket(
    xla_python, tmp_path, monkeypatch
):
    """Issue 40, point 6: batches of their own length recompile every step; padded to one
    bucket on the host, with a mask as data, the step is one graph that compiles once."""
    data = compare_training_steps(xla_python, tmp_path, monkeypatch, "unpadded_step",
                                  "padded_step")  # fmt: skip
    unpadded, padded = (v["xla"] for v in data["variants"])
    assert unpadded["recompiles_every_step"] is True
    assert unpadded["compiles_in_window"] == unpadded["window_steps"] > 0
    measured = [r for r in unpadded["recompiles"] if r["phase"] == "measured"]
    assert measured and len(measured[0]["shapes"]) >= 2
    assert "bucket" in measured[0]["advice"]
    assert padded["compiles_in_window"] == 0 and padded["recompiles_every_step"] is False
    assert padded["per_step"]["graphs"] == 1
    text = render_comparison(data)
    xla_table = text[text.index("XLA (per step: graphs executed") :].splitlines()
    rows = {line.split()[0]: line.split() for line in xla_table if line.strip()}
    assert rows["unpadded_step"][2] == str(unpadded["compiles_in_window"])
    assert rows["padded_step"][2] == "0"
