"""A compiled step on 2 ranks: the collective wrapper must not change what dynamo compiles (it
once added 3 graph breaks), and the graph's own collective (a functional all_reduce, launch then
wait) is timed on each rank, the others waiting in it for the rank with more work."""

from __future__ import annotations

from tests.ranks.conftest import IMBALANCED, profile


def test_a_compiled_step_keeps_its_one_graph_on_every_rank(make_project):
    root = make_project({"ranks_step.py": IMBALANCED, "pyproject.toml": ""})
    result = profile(root, "step", 2, compiled=True, lines=False)
    assert result["error"] is None and result["world_size"] == 2
    compile_info = result["compile"]
    assert compile_info["breaks"] == [] and compile_info["graphs_per_call"] == 1
    (collective,) = result["collectives"]
    assert collective["name"] == "all_reduce" and collective["compiled"]
    assert collective["path"] is None  # its line is not known inside the graph
    waits = {p["rank"]: p["wait_per_step_us"] for p in collective["per_rank"]}
    assert waits[0] > waits[1]
    assert result["slowest_rank"] == 1
