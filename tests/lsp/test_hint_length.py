"""Every inlay hint the server makes fits VS Code's default ``editor.inlayHints.maximumLength``
(43 UTF-16 units for all the hints of a line together: beyond it VS Code cuts the label with "…"
and leaves the line's later hints out), with its key figure, ``stale`` and a rank's wait in the
label and the rest in the tooltip (issue 42, point 4; lsp/hints.py ``fitted``).

The runs are stored by hand with figures as wide as a real fine-tuning step's (``85% · 192 ms ·
443 dispatches · backward 58%``, cut at "backward …" before), and the server places them when
the file opens, as after any run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

from lsprotocol import types
from trnlens.agent import sources
from trnlens.agent.notebook import cells
from trnlens.lsp import hints, library, xla_figures
from trnlens.lsp.documents import ProfiledDocument
from trnlens.results import Result
from trnlens.store import Store

from tests.notebooks import SAMPLE, cell_line

from ..test_store import fake_result
from .session import editor, workspace
from .test_e2e_notebook import edit_cell, open_notebook

LIMIT = 43  # VS Code's default editor.inlayHints.maximumLength
EVERYWHERE = types.Range(types.Position(0, 0), types.Position(500, 0))

STEP = """import torch
import torch.distributed as dist


def step(model, x, opt):
    loss = model(x).sum()
    loss.backward()
    opt.step()
    return loss


def forward_only(model, x):
    h = model(x)
    return h.sum()
"""
FORWARD, BACKWARD, OPT_STEP = 6, 7, 8  # 1-based lines of STEP
HEAD = 13


def width(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def by_line(found: list[types.InlayHint]) -> dict[int, str]:
    """Each line's hints as VS Code lays them out, joined (their widths add up)."""
    lines: dict[int, str] = {}
    for hint in found:
        label = hint.label if isinstance(hint.label, str) else "".join(p.value for p in hint.label)
        lines[hint.position.line] = lines.get(hint.position.line, "") + label
    return lines


def assert_fits(found: list[types.InlayHint]) -> dict[int, str]:
    lines = by_line(found)
    assert lines
    for line, text in lines.items():
        assert width(text) <= LIMIT, f"line {line + 1}: {text!r} is {width(text)} wide"
    return lines


def entry(line: int, time_us: float, dispatches: int, backward: int = 0, **extra) -> dict:
    made = {"path": "model.py", "line": line, "cpu_us": time_us, "device_us": time_us,
            "dispatches": dispatches, "ops": {}, **extra}  # fmt: skip
    if backward:
        made["backward"] = {"dispatches": backward, "cpu_us": 0.58 * time_us,
                            "device_us": 0.58 * time_us}  # fmt: skip
    return made


def step_run(i: int, qualname: str, lines: list[dict], **extra) -> dict:
    result = fake_result(i, qualname=qualname, **extra)
    result["function"]["source_hash"] = sources.source_hash(
        STEP, sources.find_definition(STEP, qualname)
    )
    result["function"]["line"] = next(
        n for n, text in enumerate(STEP.splitlines(), 1) if text.startswith(f"def {qualname}(")
    )
    result["lines"] = lines
    return result


def ranks_run() -> dict:
    """A 2-rank step whose all_reduce (DDP's, from the backward's hooks) is on the backward line,
    beside that line's own figures: ``r0 4% · 9.93 ms · 25 dispatches · backward …`` before."""
    return step_run(
        1, "step",
        [entry(FORWARD, 192_000.0, 443, backward=210), entry(BACKWARD, 9_930.0, 25, backward=25),
         entry(OPT_STEP, 30_000.0, 1_204)],
        world_size=2, slowest_rank=0, rank_spread={"slowest_vs_others_pct": 68.0},
        ranks=[
            {"rank": 0, "wall_time_per_step_us": 7270.0, "busy_time_per_step_us": 5000.0,
             "collective_time_per_step_us": 2300.0, "collective_wait_per_step_us": 2270.0},
            {"rank": 1, "wall_time_per_step_us": 7200.0, "busy_time_per_step_us": 2970.0,
             "collective_time_per_step_us": 4300.0, "collective_wait_per_step_us": 4230.0},
        ],
        collectives=[
            {"name": "all_reduce", "path": "model.py", "line": BACKWARD, "share_of_step": 0.31,
             "per_rank": [
                 {"rank": 0, "time_per_step_us": 2300.0, "wait_per_step_us": 2270.0},
                 {"rank": 1, "time_per_step_us": 14300.0, "wait_per_step_us": 14230.0},
             ]},
        ],
    )  # fmt: skip


async def test_cpu_backward_and_rank_hints_fit_43_with_stale_and_the_wait(tmp_path):
    root = workspace(tmp_path)
    (root / "model.py").write_text(STEP, "utf-8")
    single = step_run(
        2, "forward_only",
        [entry(HEAD, 192_000.0, 443, backward=210), entry(HEAD + 1, 33_900.0, 12)],
    )  # fmt: skip
    with Store(root) as store:
        store.add(ranks_run())
        store.add(single)
    async with editor(root) as ed:
        uri = ed.open()
        lines = assert_fits(await ed.hints(uri))
        # the key figures: share and time; the dispatches while they fit
        assert lines[HEAD - 1] == "  85% · 192 ms · 443 dispatches · bwd 58%"
        assert lines[FORWARD - 1] == "  r0 83% · 192 ms · 443 dispatches"
        # the all_reduce's wait is seen beside the backward line's own figures
        assert "r1 waits 14.2 ms" in lines[BACKWARD - 1], lines[BACKWARD - 1]
        assert lines[BACKWARD - 1].startswith("  r0 4% · 9.93 ms"), lines[BACKWARD - 1]
        [own, wait] = [h for h in await ed.hints(uri) if h.position.line == BACKWARD - 1]
        assert own.label.startswith("  r0") and "waits" in wait.label  # its figures first
        assert "25 dispatches" in str(own.tooltip)  # what the label left out
        assert "all_reduce: r1 waits 14.2 ms of 14.3 ms" in str(wait.tooltip)

        # Both functions edited: every hint says stale, still within 43.
        ed.edit(uri, HEAD, 0, "    # edited\n")
        ed.edit(uri, FORWARD, 0, "    # edited\n")
        lines = assert_fits(await ed.hints(uri))
        assert len(lines) == 5
        assert all("stale" in text for text in lines.values()), lines
        assert "waits" in lines[BACKWARD], lines  # the backward line, one down


def store_notebook_run(root: Path) -> None:
    """A run of the sample notebook's ``rms`` (its rsqrt line's figures as wide as above)."""
    shutil.copy(SAMPLE, root / "nb.ipynb")
    joined = cells.join_notebook((root / "nb.ipynb").read_text("utf-8")).text
    naive = joined.splitlines().index(
        next(line for line in joined.splitlines() if "torch.rsqrt" in line)
    )
    result = fake_result(1, path="nb.ipynb", qualname="rms")
    definition = sources.find_definition(joined, "rms")
    result["function"]["source_hash"] = sources.source_hash(joined, definition)
    result["function"]["line"] = definition.def_line
    result["lines"] = [{**entry(naive + 1, 192_000.0, 443, backward=210), "path": "nb.ipynb"}]
    with Store(root) as store:
        store.add(result)


async def test_a_notebook_cells_hints_fit_43_and_say_stale(tmp_path):
    root = workspace(tmp_path)
    store_notebook_run(root)
    _, in_cell = cell_line(root / "nb.ipynb", "rms-cell", "torch.rsqrt")
    async with editor(root) as ed:
        cell = open_notebook(ed)["rms-cell"]
        lines = assert_fits(await ed.hints(cell))
        assert lines == {in_cell - 1: "  100% · 192 ms · 443 dispatches · bwd 58%"}
        edit_cell(ed, (root / "nb.ipynb").as_uri(), cell, in_cell - 1, "    # edited\n", 2)
        lines = assert_fits(await ed.hints(cell))
        assert lines == {in_cell: "  100% · 192 ms · 443 dispatches · stale"}


async def test_a_hint_asked_while_the_notebook_file_is_read_waits_for_its_runs(tmp_path):
    """The notebook's open reads the file (its cells' ids) off the loop before placing its runs:
    a hint asked meanwhile waits for them (it was answered with none: CI, 1 run in 3). The file
    is a FIFO here, so the read lasts until the test writes it: a disk as slow as it takes."""
    root = workspace(tmp_path)
    store_notebook_run(root)
    text = (root / "nb.ipynb").read_text("utf-8")
    _, in_cell = cell_line(root / "nb.ipynb", "rms-cell", "torch.rsqrt")
    (root / "nb.ipynb").unlink()
    os.mkfifo(root / "nb.ipynb")
    notebook = json.loads(text)
    async with editor(root) as ed:
        cell = open_notebook(ed, notebook=notebook)["rms-cell"]
        asked = asyncio.ensure_future(ed.hints(cell))
        # a request sent after it, answered at once: the server has taken the hint's by then
        assert await ed.hover((root / "elsewhere.py").as_uri(), 0) is None
        assert not asked.done()  # it waits for the file
        await asyncio.to_thread((root / "nb.ipynb").write_text, text, "utf-8")
        lines = assert_fits(await asked)
        assert lines == {in_cell - 1: "  100% · 192 ms · 443 dispatches · bwd 58%"}


def _doc(text: str, path: Path, root: Path) -> ProfiledDocument:
    return ProfiledDocument(path.as_uri(), path, root, text, generation=1)


def test_an_xla_runs_hints_fit_43_keeping_its_problems_and_stale():
    doc = _doc(STEP, Path("/p/model.py"), Path("/p"))
    result = step_run(
        3, "forward_only", [entry(HEAD, 192_000.0, 443, backward=210)],
        backend="xla", device="xla:0", time_basis="device",
        xla={
            "per_step": {"graphs": 2}, "compiles_in_window": 3, "recompiles_every_step": True,
            "lines": [{"path": "model.py", "line": HEAD, "ir_nodes": 1204,
                       "backward_ir_nodes": 388, "graphs": [1], "ops": 40, "backward_ops": 12}],
            "fallbacks": [{"op": "aten::_local_scalar_dense", "path": "model.py", "line": HEAD,
                           "count": 1}],
            "forced": [],
            "recompiles": [{"path": "model.py", "line": HEAD, "phase": "measured",
                            "kind": "shape", "count": 3, "detail": "x's shape changed"}],
        },
    )  # fmt: skip
    result["function"]["source_hash"] = "sha256:edited since"  # stale
    doc.place(Result(result))
    alone = assert_fits(xla_figures.inlay_hints(doc, EVERYWHERE))
    assert alone[HEAD - 1] == "  CPU fallback · recompiles · stale"
    [hint] = xla_figures.inlay_hints(doc, EVERYWHERE)
    assert "CPU fallback aten::_local_scalar_dense" in str(hint.tooltip)  # the whole label
    assert "1204 IR nodes (388 bwd) · graph 1 · " in str(hint.tooltip)
    # with the line's own figures on the same line: the XLA problems first, both seen
    both = hints.labelled(doc, EVERYWHERE) + xla_figures.labelled(doc, EVERYWHERE)
    lines = assert_fits(hints.fitted(both))
    assert "CPU fallback" in lines[HEAD - 1] and "stale" in lines[HEAD - 1]


def test_a_library_files_hints_fit_43_and_say_stale(tmp_path):
    library_file = tmp_path / "site-packages" / "lib" / "layers.py"
    library_file.parent.mkdir(parents=True)
    text = "def f(x):\n    return x * 2\n"
    library_file.write_text(text, "utf-8")
    project = _doc(STEP, Path("/p/model.py"), Path("/p"))
    result = step_run(4, "forward_only", [entry(HEAD, 192_000.0, 443)])
    result["frames"] = [
        {"path": str(library_file), "line": 2, "function": "f", "project": False,
         "self_time_per_step_us": 192_000.0, "dispatches_per_step": 12_443,
         "backward_dispatches_per_step": 4_000, "backward_self_time_per_step_us": 111_000.0,
         "callers": [{"path": "model.py", "line": HEAD, "dispatches_per_step": 12_443}]},
        {"path": str(library_file), "line": 1, "function": "f", "project": False,
         "self_time_per_step_us": 10.0, "dispatches_per_step": 1},
    ]  # fmt: skip
    result["library_digests"] = {str(library_file): "sha256 of what the run read"}  # stale
    project.place(Result(result))
    doc = _doc(text, library_file, tmp_path)
    lines = assert_fits(library.inlay_hints(doc, [project], EVERYWHERE))
    assert lines[1] == "100% · 192 ms · 12443 dispatches · stale", lines
    assert all(text.endswith(" · stale") for text in lines.values())


def test_several_runs_on_one_line_fit_43_with_their_names_when_they_can():
    doc = _doc(STEP, Path("/p/model.py"), Path("/p"))
    for i, qualname in enumerate(("step", "forward_only")):
        made = step_run(5 + i, qualname, [entry(HEAD, 192_000.0, 443, backward=210)])
        doc.place(Result(made))
    [hint] = hints.inlay_hints(doc, EVERYWHERE)
    assert width(hint.label) <= LIMIT
    assert hint.label == "  step: 100% │ forward_only: 100%", hint.label
    assert json.dumps(hint.tooltip).count("443 dispatches") == 2
