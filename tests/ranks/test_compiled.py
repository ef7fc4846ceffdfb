"""A compiled step on 2 ranks: the collective wrapper must not change what dynamo compiles (it
once added 3 graph breaks), and the result says the graph's collectives are not timed apart."""

from __future__ import annotations

from tests.ranks.conftest import IMBALANCED, profile


def test_a_compiled_step_keeps_its_one_graph_on_every_rank(make_project):
    root = make_project({"ranks_step.py": IMBALANCED, "pyproject.toml": ""})
    result = profile(root, "step", 2, compiled=True, lines=False)
    assert result["error"] is None and result["world_size"] == 2
    compile_info = result["compile"]
    assert compile_info["breaks"] == [] and compile_info["graphs_per_call"] == 1
    assert result["collectives"] == []
    assert any("inside its compiled graph" in w for w in result["warnings"])
