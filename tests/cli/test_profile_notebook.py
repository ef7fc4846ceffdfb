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
    assert f"{NB}:cell {index}:{line} " in out and "x.pow(2).mean(-1" in out
    run_dir = next((samples / ".trnlens" / "artifacts").iterdir())
    result = json.loads((run_dir / "result.json").read_text())
    jsonschema.validate(result, schema())
    assert result["function"]["path"] == NB and result["dispatches_per_step"] == 6
    (row,) = result["lines"]
    assert row["cell"] == {"index": index, "id": "rms-cell", "line": line}
    assert {"index": index, "id": "rms-cell", "start": row["line"] - line + 1, "count": 6} in (
        result["notebook"]["cells"]
    )


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
    assert "error at nb.ipynb:cell 1:3: AttributeError" in done.stdout
