"""What torch.compile did, collected during real compiled runs on the CPU (compilelog.py).

Every compile costs seconds on these cores: each test compiles one small function once.
"""

from __future__ import annotations

import pytest
import torch
from trnlens.agent.compilelog import CompileLog, op_names, summarize_reason
from trnlens.cli.render import render_result
from trnlens.results import schema

from tests.agent.conftest import line_of, run

BREAKS = """
import torch


def helper(x):
    return x * 2


def with_print(x=torch.randn(8, 16)):
    y = x.sin()
    print("between the graphs")
    return helper(y).cos()


def branchy(x=torch.randn(8, 16)):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1
"""

RMS = """
import torch


def inputs():
    return (torch.randn(4, 32, 128), torch.randn(128))


# trnlens: inputs=inputs
def naive(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
"""


def _valid(result: dict) -> None:
    import jsonschema

    jsonschema.validate(result, schema())


@pytest.mark.slow
def test_print_in_the_middle_is_one_break_at_its_line(make_project, capfd):
    root = make_project({"breaks.py": BREAKS})
    result = run(root, [{"path": "breaks.py", "qualname": "with_print", "compile": True}])
    assert result["error"] is None, result["error"]
    info = result["compile"]
    [only] = info["breaks"]
    print_line = line_of(root, "breaks.py", 'print("between')
    assert (only["path"], only["line"]) == ("breaks.py", print_line)
    assert "print" in only["reason"] and only["function"] == "with_print"
    assert info["graphs_per_call"] == 2 and result["dispatches_per_step"] == 2
    first, second = info["graphs"]
    assert first["op_names"] == ["sin"]
    assert second["op_names"] == ["mul", "cos"]  # the helper's mul is inlined after the break
    assert info["recompiles"] == []
    times = info["compile_time_us"]
    assert times["total_us"] > times["backend_us"] > 0 and times["tracing_us"] > 0
    assert info["compiled_in_run"] and info["reused_from"] is None
    assert 0 < info["collection_us"]
    _valid(result)
    table = render_result(result, root=root)
    assert "2 graphs per call" in table and "1 graph break" in table
    assert f"graph break at breaks.py:{only['line']}: " in table
    assert "Graph break" not in capfd.readouterr().err  # dynamo's log stayed ours alone

    # A warm agent runs the same function again: nothing compiles, the earlier compile is shown.
    again = run(root, [{"path": "breaks.py", "qualname": "with_print", "compile": True}])
    assert not again["compile"]["compiled_in_run"] and again["compile"]["reused_from"]
    assert again["compile"]["breaks"] == info["breaks"]
    assert any("earlier run" in w for w in again["compile"]["warnings"])


@pytest.mark.slow
def test_data_dependent_branch_breaks_with_that_reason(make_project):
    root = make_project({"breaks.py": BREAKS})
    result = run(root, [{"path": "breaks.py", "qualname": "branchy", "compile": True}])
    [only] = result["compile"]["breaks"]
    assert only["line"] == line_of(root, "breaks.py", "if y.sum() > 0")
    assert only["reason"].startswith("Data-dependent branching")
    assert any("torch.cond" in hint for hint in only["hints"])


@pytest.mark.slow
def test_compiled_naive_rmsnorm_is_one_graph_without_breaks(make_project):
    root = make_project({"rms.py": RMS})
    result = run(root, [{"path": "rms.py", "qualname": "naive", "compile": True}])
    info = result["compile"]
    assert info["breaks"] == [] and info["recompiles"] == []
    [graph] = info["graphs"]
    assert info["graphs_per_call"] == 1 and result["dispatches_per_step"] == 1
    assert graph["op_names"] == ["pow", "mean", "add", "rsqrt", "mul", "mul"]
    assert graph["ops"] == 6 and graph["function"] == "naive"
    assert (graph["path"], graph["line"]) == ("rms.py", line_of(root, "rms.py", "def naive"))


def _scaled(x):
    return torch.relu(x) * 3


@pytest.mark.slow
def test_new_shape_in_the_measured_window_is_a_recompile_with_its_guard():
    compiled = torch.compile(_scaled)
    shapes = iter([4, 4, 5])  # first call and warm-up: 4 rows; then a call with 5 rows
    log = CompileLog(torch, lambda p: p == __file__, lambda p: "test_compilelog.py", warmup=2)
    step = log.start().wrap(lambda: compiled(torch.ones(next(shapes), 3)))
    for _ in range(3):
        step()
    info = log.finish()
    [recompile] = info["recompiles"]
    assert recompile["phase"] == "measured" and recompile["function"] == "_scaled"
    assert recompile["guard"] == "tensor 'x' size mismatch at index 0. expected 4, actual 5"
    assert [g["phase"] for g in info["graphs"]] == ["first_call", "measured"]
    assert info["graphs_per_call"] == 1


def test_reason_summary_keeps_the_type_and_the_explanation():
    text = """Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):

Failed to trace builtin operator
  Explanation: Dynamo does not know how to trace builtin operator `print`
  Hint: Avoid calling builtin `print`.

  Developer debug context: builtin print
"""
    title, hints = summarize_reason(text)
    assert title == (
        "Failed to trace builtin operator: Dynamo does not know how to trace builtin operator "
        "`print`"
    )
    assert hints == ["Avoid calling builtin `print`."]


def test_op_names_read_calls_methods_and_operators():
    code = """class GraphModule(torch.nn.Module):
    def forward(self, L_x_: "f32[4, 8][8, 1]cpu"):
        l_x_ = L_x_
        pow_1: "f32[4, 8][8, 1]cpu" = l_x_.pow(2)
        add: "f32[4, 1][1, 1]cpu" = pow_1 + 1e-06;  pow_1 = None
        rsqrt: "f32[4, 1][1, 1]cpu" = torch.rsqrt(add);  add = None
        getitem = rsqrt[0]
        return (getitem,)
"""
    assert op_names(code) == ["pow", "add", "rsqrt", "getitem"]


def test_a_duplicate_break_without_its_stack_keeps_dynamo_s_location(tmp_path):
    # A warm agent compiling a reloaded module again: dynamo logs a break it has seen before
    # without the user stack; the location it names is the innermost traced frame.
    project = str(tmp_path / "m.py")
    log = CompileLog(torch, lambda p: p == project, lambda p: "m.py", warmup=1)
    found = log._graph_break(
        "Graph break (user stack suppressed due to duplicate graph break) in user code at "
        f"{project}:12\nGraph Break Reason: Data-dependent branching\n"
        "  Explanation: Detected data-dependent branching."
    )
    assert (found["path"], found["line"], found["in_project"]) == ("m.py", 12, True)
    assert found["reason"] == "Data-dependent branching: Detected data-dependent branching."


def test_the_innermost_project_frame_is_where_the_break_is_shown(tmp_path):
    project = str(tmp_path / "model.py")
    log = CompileLog(torch, lambda p: p == project, lambda p: "model.py", warmup=1)
    found = log._graph_break(
        f"Graph break in user code at /site-packages/lib.py:40\nGraph Break Reason: x\n\n"
        f'User code traceback:\n  File "{project}", line 7, in forward\n    y = lib.f(x)\n'
        '  File "/site-packages/lib.py", line 40, in f\n    print(x)\n'
    )
    assert (found["path"], found["line"], found["function"]) == ("model.py", 7, "forward")
