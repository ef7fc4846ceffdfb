"""``trnlens profile`` on a training step that keeps a tensor a step (issue 41): the memory part
of the output (cli/render_memory.py), from a real run on the CPU, and its JSON valid against the
result schema. The figures themselves are tested exactly in tests/agent/test_memorypass.py."""

from __future__ import annotations

import json

import jsonschema
import nbformat
from nbformat import v4
from trnlens.results import schema

from tests.agent.test_memorypass import KEPT, STEP
from tests.agent.test_outofmemory import OOM_STEP, TOO_MANY
from tests.cli.conftest import trnlens

FAST = ("--warmup", "1", "--steps", "2", "--repeats", "3", "--mode", "as-written")


def test_the_output_says_the_peak_by_kind_and_the_growth_loudly_at_its_line(tmp_path):
    (tmp_path / "train.py").write_text(STEP)
    growing = next(i for i, t in enumerate(STEP.splitlines(), 1) if "history.append" in t)
    done = trnlens("profile", "train.py::leaky", *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Memory (cpu, torch.profiler memory timeline, 2 steps)" in out
    assert "  peak " in out and " in optimizer (train.py:" in out
    assert "live then: parameters 49.8 KB · gradients 49.8 KB · optimizer state 99.6 KB" in out
    assert f"GROWTH at train.py:{growing}: memory grows 4.0 KB a step here" in out
    # what is live at the peak by where it was made: the update's temporaries, the kept tensor
    update = growing - 2  # leaky's opt.step()
    assert f"    by line: train.py:{update} temporaries 65.5 KB · " in out
    assert f"train.py:{growing} kept by earlier steps 4.0 KB" in out
    assert "    by library line: torch/" in out and "torch/optim/adam.py:" in out
    assert (
        "activations kept for backward, by module (one step): model.1 8.2 KB · model.2 2.0 KB"
        in out
    )
    assert "peak +" not in out  # the profiler's host delta is not shown beside it
    run_dir = next((tmp_path / ".trnlens" / "artifacts").iterdir())
    result = json.loads((run_dir / "result.json").read_text())
    jsonschema.validate(result, schema())
    assert result["memory"]["growth_per_step_bytes"] == KEPT


def test_a_step_that_keeps_nothing_says_so(tmp_path):
    (tmp_path / "train.py").write_text(STEP)
    done = trnlens("profile", "train.py::clean", *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no growth: nothing a step allocates is held after it" in done.stdout
    assert "GROWTH" not in done.stdout


def test_a_notebooks_growth_is_at_its_cell_line(tmp_path):
    setup, step = STEP.split("\n\ndef inputs():", 1)
    notebook = v4.new_notebook()
    notebook.cells = [
        v4.new_markdown_cell("# a step that keeps a tensor a step"),
        v4.new_code_cell(setup.strip(), id="setup"),
        v4.new_code_cell("def inputs():" + step, id="step"),
    ]
    nbformat.write(notebook, tmp_path / "nb.ipynb")
    growing = next(
        i for i, t in enumerate(("def inputs():" + step).splitlines(), 1) if "history.append" in t
    )
    done = trnlens("profile", "nb.ipynb::leaky", *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # cells counted from 1, as VS Code's status bar counts them: the step's is the third
    assert f"GROWTH at nb.ipynb:cell 3:{growing}: memory grows 4.0 KB a step" in done.stdout


def test_compare_gives_each_variants_peak_against_the_baseline_and_its_growth(tmp_path):
    (tmp_path / "train.py").write_text(STEP)
    growing = next(i for i, t in enumerate(STEP.splitlines(), 1) if "history.append" in t)
    done = trnlens("compare", "train.py::clean", "train.py::leaky", *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.split("Memory per variant (cpu, torch.profiler memory timeline)\n", 1)[1]
    clean, leaky = (row.strip() for row in out.splitlines()[2:4])
    assert clean.startswith("clean (baseline)") and clean.endswith("  none")
    assert leaky.startswith("leaky ") and leaky.endswith(f"4.0 KB a step at train.py:{growing}")
    assert " +1.5% " in leaky  # the 4,000 B the baseline's peak does not hold, of 268.8 KB


def test_no_memory_leaves_the_pass_out(tmp_path):
    (tmp_path / "train.py").write_text(STEP)
    done = trnlens("profile", "train.py::clean", *FAST, "--no-memory", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Memory (" not in done.stdout
    run_dir = next((tmp_path / ".trnlens" / "artifacts").iterdir())
    assert json.loads((run_dir / "result.json").read_text())["memory"] is None


def test_an_out_of_memory_failure_is_an_outcome_at_its_line_not_a_traceback(tmp_path):
    (tmp_path / "oom.py").write_text(OOM_STEP)
    done = trnlens("profile", "oom.py::step", *FAST, cwd=tmp_path)
    assert done.returncode == 3, done.stderr  # the profiled code failed
    line = next(i for i, t in enumerate(OOM_STEP.splitlines(), 1) if "too much" in t)
    assert (
        f"error at oom.py:{line}: out of memory on cpu in model.0 (Wide): the allocation asked "
        f"for {TOO_MANY * 4:,} bytes (RuntimeError)"
    ) in done.stdout
    assert "  live on cpu when it failed: parameters 8.3 KB · other " in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    run_dir = next((tmp_path / ".trnlens" / "artifacts").iterdir())
    result = json.loads((run_dir / "result.json").read_text())
    jsonschema.validate(result, schema())
    assert result["error"]["out_of_memory"]["requested_bytes"] == TOO_MANY * 4
