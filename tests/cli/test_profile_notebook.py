"""``trnlens profile NB.ipynb::QUALNAME``: the notebook's code cells run as a module (magics
skipped), the function defined in a cell profiled, its lines shown in cell coordinates."""

from __future__ import annotations

import json

import jsonschema
from trnlens.results import schema

from tests.cli.conftest import trnlens
from tests.notebooks import cell_line

FAST = ("--warmup", "1", "--steps", "2", "--repeats", "3")
NB = "samples/rmsnorm_notebook.ipynb"


def test_a_function_defined_in_a_cell_is_profiled_with_cell_lines(samples):
    done = trnlens("profile", f"{NB}::rms", *FAST, cwd=samples)
    assert done.returncode == 0, done.stderr
    index, line = cell_line(samples / NB, "rms-cell", "torch.rsqrt")
    out = done.stdout
    assert "6 dispatches/step" in out  # the naive RMSNorm, its inputs from the cell's directive
    assert f"{NB}:cell {index + 1}:{line} " in out and "x.pow(2).mean(-1" in out
    run_dir = next((samples / ".trnlens" / "artifacts").iterdir())
    result = json.loads((run_dir / "result.json").read_text())
    jsonschema.validate(result, schema())
    assert result["function"]["path"] == NB and result["dispatches_per_step"] == 6
    (row,) = result["lines"]
    assert row["cell"] == {"index": index, "id": "rms-cell", "line": line}
    assert {"index": index, "id": "rms-cell", "start": row["line"] - line + 1, "count": 6} in (
        result["notebook"]["cells"]
    )


def test_the_report_of_a_notebook_run_shows_its_cells_lines_and_source(samples, tmp_path):
    done = trnlens("profile", f"{NB}::rms", *FAST, cwd=samples)
    assert done.returncode == 0, done.stderr
    page = tmp_path / "report.html"
    made = trnlens("report", f"{NB}::rms", "--output", str(page), cwd=samples)
    assert made.returncode == 0, made.stderr
    html = page.read_text("utf-8")
    index, line = cell_line(samples / NB, "rms-cell", "torch.rsqrt")
    # the per-line table: the line in its cell beside the cell's source, not notebook JSON
    assert f'<td class="num">cell {index + 1}:{line}</td>' in html
    assert "x.pow(2).mean(-1, keepdim=True)" in html and '"cell_type"' not in html


def test_an_error_in_a_cell_is_reported_at_the_cell_line(tmp_path):
    import nbformat
    from nbformat import v4

    nb = v4.new_notebook()
    nb.cells = [
        v4.new_code_cell("%load_ext autoreload\nimport torch", id="a"),
        v4.new_code_cell("def boom():\n    x = torch.ones(2)\n    return x.nope()", id="b"),
    ]
    nbformat.write(nb, tmp_path / "nb.ipynb")
    done = trnlens("profile", "nb.ipynb::boom", *FAST, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "error at nb.ipynb:cell 2:3: AttributeError" in done.stdout


def test_diff_shows_a_notebooks_lines_in_its_cells(tmp_path):
    import nbformat
    from nbformat import v4

    nb = v4.new_notebook()
    nb.cells = [
        v4.new_code_cell("%matplotlib inline\nimport torch", id="imports"),
        v4.new_code_cell(
            "def inputs():\n    return (torch.randn(8, 64), torch.randn(64))\n\n\n"
            "# trnlens: inputs=inputs\ndef naive(x, w):\n"
            "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w",
            id="naive",
        ),
        v4.new_code_cell(
            "# trnlens: inputs=inputs\ndef fused(x, w):\n"
            "    return torch.rms_norm(x, (64,), w, 1e-6)",
            id="fused",
        ),
    ]
    nbformat.write(nb, tmp_path / "nb.ipynb")
    done = trnlens("compare", "nb.ipynb::naive", "nb.ipynb::fused", *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    again = trnlens("profile", "nb.ipynb::naive", *FAST, "--format", "json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    # diff's line table: each line in its cell (the second cell, line 7 of the naive one), never the
    # joined text's line (12)
    first = trnlens("history", "nb.ipynb::naive", "--format", "json", cwd=tmp_path)
    runs = [r["run_id"] for r in json.loads(first.stdout)["runs"]]
    diff = trnlens("diff", runs[-1], runs[0], cwd=tmp_path)
    assert diff.returncode == 0, diff.stderr
    assert "nb.ipynb:cell 2:7" in diff.stdout, diff.stdout
