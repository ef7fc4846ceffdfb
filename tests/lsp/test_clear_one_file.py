"""Clear Results for one file clears that file's runs only (issue 42, point 9): an open library
file keeps the figures another file's run measured there; a notebook's cell (what the editor
sends from a cell) clears its notebook's runs and no other file's."""

from __future__ import annotations

import shutil

from trnlens.agent import sources
from trnlens.libraries import rules
from trnlens.store import Store

from tests.cli.conftest import REPO
from tests.libraries.fixtures import llama_result, modeling_llama

from .session import editor, workspace
from .test_e2e_notebook import open_notebook
from .test_hint_length import store_notebook_run
from .test_library import SAMPLE, _open_path

OTHER = "samples/other_llama.py"


def _stored(root, path: str, run_id: str, scale: float) -> dict:
    text = (root / path).read_text("utf-8")
    result = llama_result()
    result["run_id"] = run_id
    result["function"]["path"] = path
    result["function"]["source_hash"] = sources.source_hash(
        text, sources.find_definition(text, "logits")
    )
    for frame in result["frames"]:
        frame["dispatches_per_step"] *= scale
        for caller in frame["callers"]:
            caller["path"] = path
    rules.attach(result)
    return result


async def test_clearing_one_file_leaves_the_library_hints_of_another_files_run(tmp_path):
    root = tmp_path / "project"
    (root / "samples").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n', "utf-8")
    shutil.copy(REPO / SAMPLE, root / SAMPLE)
    shutil.copy(REPO / SAMPLE, root / OTHER)
    with Store(root) as store:
        store.add(_stored(root, SAMPLE, "20260101T000000-aaaaaaaa", 1))
        store.add(_stored(root, OTHER, "20260101T000001-bbbbbbbb", 2))
    async with editor(root) as ed:
        sample = ed.open(SAMPLE)
        other = ed.open(OTHER)
        uri = _open_path(ed, modeling_llama())
        before = {h.position.line + 1: h.label for h in await ed.hints(uri, lines=200)}
        assert before, before
        answer = await ed.command("trnlens.server.clearResults", {"uri": sample})
        assert answer == {"cleared": 1}
        after = {h.position.line + 1: h.label for h in await ed.hints(uri, lines=200)}
        assert after[66] == "6% · 300 µs · 30 dispatches", after  # the other file's run
        answer = await ed.command("trnlens.server.clearResults", {"uri": other})
        assert answer == {"cleared": 1}
        assert await ed.hints(uri, lines=200) == []


async def test_clearing_a_notebook_from_its_cell_clears_its_runs_and_no_others(tmp_path):
    root = workspace(tmp_path)
    store_notebook_run(root)
    text = (root / "model.py").read_text("utf-8")
    with Store(root) as store:
        model = _model_run(text)
        store.add(model)
    async with editor(root) as ed:
        cell = open_notebook(ed)["rms-cell"]
        model_uri = ed.open()
        assert await ed.hints(cell) and await ed.hints(model_uri)
        answer = await ed.command("trnlens.server.clearResults", {"uri": cell})
        assert answer == {"cleared": 1}
        assert await ed.hints(cell) == []  # was still shown: the cell's uri found no document
        assert await ed.hints(model_uri)  # another file's run stays
        lenses = await ed.lenses(cell)
        assert lenses["rms"].command.title == "▶ Profile"


def _model_run(text: str) -> dict:
    from ..test_store import fake_result

    result = fake_result(7, qualname="rmsnorm_naive")
    definition = sources.find_definition(text, "rmsnorm_naive")
    result["function"]["source_hash"] = sources.source_hash(text, definition)
    result["function"]["line"] = definition.def_line
    line = definition.def_line + 1
    result["lines"] = [{"path": "model.py", "line": line, "cpu_us": 5.0, "device_us": 5.0,
                        "dispatches": 2, "ops": {}}]  # fmt: skip
    return result
