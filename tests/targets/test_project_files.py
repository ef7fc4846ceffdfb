"""Which files a remote run ships: a notebook's imports are read from its code cells."""

from __future__ import annotations

import nbformat
from nbformat import v4
from trnlens.targets.project_files import needed_files


def test_a_notebook_ships_the_project_modules_its_cells_import(tmp_path):
    (tmp_path / "helpers.py").write_text("def double(t):\n    return t * 2\n")
    (tmp_path / "unrelated.py").write_text("x = 1\n")
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_markdown_cell("import unrelated"),
        v4.new_code_cell("%pip list\nimport helpers"),
    ]
    nbformat.write(nb, tmp_path / "nb.ipynb")
    found = needed_files(tmp_path, [tmp_path / "nb.ipynb"], {})
    assert [p.name for p in found] == ["helpers.py", "nb.ipynb"]
