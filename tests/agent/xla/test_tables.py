"""agent/xla/tables.py on places made by hand: backward counts on its forward's line, library
line and module, inside their figures; module totals add the callees'."""

from __future__ import annotations

from trnlens.agent.attribution import ModuleInfo
from trnlens.agent.xla import tables
from trnlens.agent.xla.sites import Sites, Tally


class Kinds:
    def kind(self, filename: str) -> str:
        return "project" if filename.startswith("/p/") else "other"

    def display(self, filename: str) -> str:
        return filename[3:] if filename.startswith("/p/") else filename


class Linear:  # what ModuleInfo reads of a module: its class
    def forward(self):
        pass


LINEAR = ("/lib/torch/nn/modules/linear.py", 125, "forward")
STEP = ("/p/step.py", 12, "step")
BACKWARD = ("/p/step.py", 13, "step")


def sites() -> Sites:
    found = Sites()
    found.modules = {
        0: ModuleInfo("model", Linear(), None, STEP, STEP),
        1: ModuleInfo("model.up", Linear(), 0, STEP, LINEAR),
    }
    places = [
        ((LINEAR, STEP, 1, False), Tally(ops=2, ir_nodes=3, graphs={1})),
        ((LINEAR, STEP, 1, True), Tally(ops=4, ir_nodes=5, graphs={1})),  # its backward
        ((STEP, STEP, 0, False), Tally(ops=1, ir_nodes=1, graphs={1})),
        (((*BACKWARD[:2], "_engine_run_backward"), BACKWARD, None, True),
         Tally(ops=2, ir_nodes=0, graphs={2})),  # AccumulateGrad, at backward()
    ]  # fmt: skip
    for place, tally in places:
        found.places.append(place)
        found.tallies.append(tally)
    return found


def test_lines_carry_their_backward_inside_their_figures():
    rows = {row["line"]: row for row in tables.lines(sites(), Kinds())}
    assert rows[12] == {"path": "step.py", "line": 12, "ops": 7, "backward_ops": 4,
                        "ir_nodes": 9, "backward_ir_nodes": 5, "graphs": [1]}  # fmt: skip
    assert rows[13]["graphs"] == [2] and rows[13]["backward_ops"] == 2


def test_library_lines_keep_full_paths_and_their_callers():
    rows, rest = tables.library_lines(sites(), Kinds())
    assert [r["path"] for r in rows] == ["/lib/torch/nn/modules/linear.py"]  # project frames out
    (linear,) = rows
    assert (linear["ir_nodes"], linear["backward_ir_nodes"], linear["ops"]) == (8, 5, 6)
    assert linear["callers"] == [{"path": "step.py", "line": 12, "ops": 6}]
    assert rest == {"count": 0, "ops": 0, "ir_nodes": 0}


def test_modules_own_and_total_figures_and_a_kept_tree():
    rows, _ = tables.modules(sites(), Kinds())
    by_name = {row["name"]: row for row in rows}
    assert by_name["model.up"]["parent"] == "model"
    assert (by_name["model.up"]["ir_nodes"], by_name["model.up"]["backward_ir_nodes"]) == (8, 5)
    assert by_name["model"]["ir_nodes"] == 1 and by_name["model"]["total_ir_nodes"] == 9
    rows, rest = tables.modules(sites(), Kinds(), limit=1)
    assert [row["name"] for row in rows] == ["model"] and rest["count"] == 1
