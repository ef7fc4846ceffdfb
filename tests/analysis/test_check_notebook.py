"""``trnlens check`` on a Jupyter notebook: the finding in its cell and line in every format, and
``--fix`` writing only the changed source back (everything else byte-identical)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from trnlens.cli import main

from tests.notebooks import SAMPLE
from tests.notebooks import cell_line as where

NAIVE_LINE = "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight"
FIXED_LINE = "    return torch.rms_norm(x, x.shape[-1:], eps=eps) * weight"


@pytest.fixture
def nb(tmp_path: Path) -> Path:
    path = tmp_path / "nb.ipynb"
    shutil.copy(SAMPLE, path)
    return path


def test_text_names_the_cell_and_its_line(nb: Path, capsys) -> None:
    assert main(["check", str(nb)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    index, line = where(nb, "rms-cell", "torch.rsqrt")
    assert len(out) == 1  # the magics, the shell line and the %%bash cell are no findings
    assert out[0].startswith(f"{nb}:cell {index + 1} (id 'rms-cell'):{line}:12: TRN001 [*] naive")


def test_json_carries_the_cell_index_and_id_and_rows_in_the_cell(nb: Path, capsys) -> None:
    assert main(["check", str(nb), "--format", "json"]) == 1
    (finding,) = json.loads(capsys.readouterr().out)
    index, line = where(nb, "rms-cell", "torch.rsqrt")
    assert finding["cell"] == {"index": index, "id": "rms-cell"}
    assert finding["location"] == {"row": line, "column": 12}
    assert finding["lines"] == [line, line]
    (edit,) = finding["fix"]["edits"]
    assert edit["cell"] == {"index": index, "id": "rms-cell"} and edit["location"]["row"] == line


def test_sarif_and_github_name_the_cell(nb: Path, capsys) -> None:
    index, line = where(nb, "rms-cell", "torch.rsqrt")
    main(["check", str(nb), "--format", "sarif"])
    (result,) = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert result["properties"]["notebookCell"] == {"index": index, "id": "rms-cell"}
    location = result["locations"][0]
    assert location["physicalLocation"]["region"]["startLine"] == line
    assert location["logicalLocations"][0]["fullyQualifiedName"] == "rms-cell"
    assert result["message"]["text"].startswith(f"cell {index + 1} (id 'rms-cell'), line {line}: ")
    main(["check", str(nb), "--format", "github"])
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"::warning file={nb},line={line},col=12,")
    assert f"::cell {index + 1} (id 'rms-cell'), line {line}: TRN001 naive RMSNorm" in out


def test_fix_changes_only_the_fixed_source_line(nb: Path, capsys) -> None:
    before = nb.read_bytes()
    assert main(["check", str(nb), "--fix"]) == 0
    after = nb.read_bytes()
    # Byte for byte: the same file with one JSON string replaced (outputs with non-ASCII text,
    # metadata, the other cells and the final newline all as Jupyter wrote them).
    old, new = json.dumps(NAIVE_LINE), json.dumps(FIXED_LINE)
    assert before.count(old.encode()) == 1
    assert after == before.replace(old.encode(), new.encode())
    assert main(["check", str(nb)]) == 0
    assert "0 findings remaining, 1 fixed in 1 file." in capsys.readouterr().err


def test_directories_take_notebooks_but_not_checkpoints(nb: Path, capsys) -> None:
    checkpoints = nb.parent / ".ipynb_checkpoints"
    checkpoints.mkdir()
    shutil.copy(nb, checkpoints / "nb-checkpoint.ipynb")
    assert main(["check", str(nb.parent), "--format", "json", "--no-cache"]) == 1
    assert [f["filename"] for f in json.loads(capsys.readouterr().out)] == [str(nb)]


def test_a_broken_notebook_is_one_clear_error(tmp_path: Path, capsys) -> None:
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": ')
    assert main(["check", str(path)]) == 1
    assert "not a notebook: invalid JSON" in capsys.readouterr().out
