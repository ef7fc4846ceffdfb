"""Compile insight wherever dynamo compiles during the run, and compiled regions in attribution.

The profiled functions here are not compiled themselves: they call a module-level compiled
function, or a module-level ``torch.compile(model)``. The ``eager`` backend keeps each compile
to a second on these cores; dynamo's graphs, breaks and regions are the same as with inductor.
"""

from __future__ import annotations

import jsonschema
import pytest
from trnlens.cli.render import render_result
from trnlens.results import schema

from tests.agent.conftest import line_of, run

CALLEES = """
import torch


@torch.compile(backend="eager")
def norm(x):
    y = x.pow(2).mean(-1, keepdim=True)
    print("between the graphs")
    return x * torch.rsqrt(y + 1e-6)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)

    def forward(self, x):
        return self.lin(x).relu()


model = torch.compile(Block(), backend="eager")


def small():
    return (torch.randn(8, 32),)


# trnlens: inputs=small
def uses_norm(x):
    y = x + 1
    return norm(y)


# trnlens: inputs=small
def uses_model(x):
    y = x * 2
    return model(y)


# trnlens: inputs=small
def eager_only(x):
    return x + 1
"""


@pytest.mark.slow
def test_a_compiled_callee_reports_the_break_at_its_print(make_project, capfd):
    root = make_project({"model.py": CALLEES})
    result = run(root, [{"path": "model.py", "qualname": "uses_norm"}])
    jsonschema.validate(result, schema())
    compiled = result["compile"]
    assert compiled["scope"] == "callee" and compiled["compiled_in_run"]
    [brk] = compiled["breaks"]
    assert (brk["path"], brk["line"]) == ("model.py", line_of(root, "model.py", "print("))
    assert brk["function"] == "norm" and "print" in brk["reason"]
    assert compiled["graphs_per_call"] == 2
    assert compiled["compile_time_us"]["total_us"] > 0
    # The attribution pass's own recompiles (its mode changes dynamo's guards) are not reported.
    assert compiled["recompiles"] == []
    assert "between the graphs" in capfd.readouterr().out
    text = render_result(result)
    assert "torch.compile (compiled code it called: a compiled function or module)" in text
    assert "2 graphs per call  ·  1 graph break" in text
    # Two regions, each one dispatch, on the line that called the compiled function.
    call = line_of(root, "model.py", "return norm(y)")
    lines = {e["line"]: e["dispatches"] for e in result["lines"]}
    assert lines == {line_of(root, "model.py", "y = x + 1"): 1, call: 2}
    assert result["dispatches_per_step"] == 3
    at_call = [f for f in result["frames"] if f["line"] == call]
    assert [f["dispatches_per_step"] for f in at_call] == [2]


@pytest.mark.slow
def test_a_module_level_compiled_model_is_one_module_on_its_calling_line(make_project):
    root = make_project({"model.py": CALLEES})
    result = run(root, [{"path": "model.py", "qualname": "uses_model"}])
    assert result["compile"]["scope"] == "callee"
    assert [g["function"] for g in result["compile"]["graphs"]] == ["forward"]
    assert result["compile"]["breaks"] == []
    call = line_of(root, "model.py", "return model(y)")
    [module] = result["modules"]  # the compiled wrapper's, under the name the user wrote
    assert (module["name"], module["type"]) == ("model", "Block")
    assert module["calls_per_step"] == 1 and module["dispatches_per_step"] == 1
    assert module["caller"] == {"path": "model.py", "line": call}
    assert {e["line"]: e["dispatches"] for e in result["lines"]}[call] == 1
    assert not any("differ from step to step" in w for w in result["warnings"])
    assert result["eval_modules"]["roots"] == ["model"]  # a module-level model the function names


def test_a_run_where_nothing_compiles_has_no_compile_section(make_project):
    root = make_project({"model.py": CALLEES})
    result = run(root, [{"path": "model.py", "qualname": "eager_only"}])
    assert "compile" not in result
