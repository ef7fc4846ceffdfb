"""A notebook's code cells as one module: IPython syntax blanked in place, lines mapped to cells."""

from __future__ import annotations

import ast
import json

import nbformat
import pytest
from nbformat import v4
from trnlens.agent.notebook import cells


def notebook(*made) -> str:
    nb = v4.new_notebook()
    nb.metadata = {"kernelspec": {"language": "python", "name": "python3", "display_name": "P"}}
    nb.cells = list(made)
    return nbformat.writes(nb) + "\n"


def test_cells_join_with_their_own_line_numbers_and_magics_blanked():
    text = notebook(
        v4.new_markdown_cell("# title\nprose"),
        v4.new_code_cell("%matplotlib inline\nimport torch\n!pip list"),
        v4.new_code_cell("for i in range(2):\n    %time f(i)\n    x = !ls\nobj?"),
        v4.new_code_cell("%%bash\necho hi\nls"),
        v4.new_code_cell("%%time\ny = 1"),
        v4.new_code_cell("def f(i):\n    return i"),
    )
    joined = cells.join_notebook(text)
    ast.parse(joined.text)  # what is left is Python
    lines = joined.text.split("\n")
    # markdown: 2 blank lines; then the imports cell from line 3
    assert lines[:5] == ["", "", "", "import torch", ""]
    assert lines[5:9] == ["for i in range(2):", "    pass", "    pass", ""]
    assert lines[9:12] == ["", "", ""]  # %%bash: not Python, blank
    assert lines[12:14] == ["", "y = 1"]  # %%time runs its body as Python
    cell, line = joined.locate(16)  # type: ignore[misc]
    assert (cell.index, line, cell.id) == (5, 2, made_id(text, 5))
    assert joined.line_of(5, 2) == 16
    assert [c.python for c in joined.cells] == [False, True, True, False, True, True]


def made_id(text: str, index: int) -> str:
    return json.loads(text)["cells"][index]["id"]


def test_a_magic_continued_by_backslash_blanks_its_continuation():
    lines, python = cells.python_lines("!echo a \\\n   b\nx = 1")
    assert python and lines == ["", "", "x = 1"]


def test_non_python_notebooks_and_cells_contribute_no_code():
    nb = json.loads(notebook(v4.new_code_cell("x = 1")))
    nb["metadata"]["kernelspec"]["language"] = "R"
    assert cells.join_notebook(json.dumps(nb)).text == "\n"
    nb = json.loads(notebook(v4.new_code_cell("SELECT 1")))
    nb["cells"][0]["metadata"]["vscode"] = {"languageId": "sql"}
    assert cells.join_notebook(json.dumps(nb)).text == "\n"


def test_replace_sources_changes_one_cell_and_keeps_every_other_byte():
    output = v4.new_output("stream", name="stdout", text="größe ✓\n")
    text = notebook(v4.new_code_cell("a = 1\nb = 2", outputs=[output]), v4.new_code_cell("c = 3"))
    new = cells.replace_sources(text, {1: "c = 4"})
    assert new == text.replace('"c = 3"', '"c = 4"')
    assert cells.replace_sources(text, {}) == text  # Jupyter's own layout, byte for byte
    assert "größe ✓" in new  # non-ASCII kept as written, never escaped


@pytest.mark.parametrize("bad", ["not json", "[1, 2]", '{"cells": 3}'])
def test_what_is_not_a_notebook_is_a_clear_error(bad):
    with pytest.raises(cells.NotebookError, match="not a notebook"):
        cells.join_notebook(bad)
