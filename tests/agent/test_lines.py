"""Per-line attribution: each dispatch counts on the innermost project line that called it."""

from __future__ import annotations

from tests.agent.conftest import line_of, run

MODEL = """
import torch

from helpers import scale


def small():
    return (torch.randn(8, 64),)


def square(v):
    return v.pow(2)


# trnlens: inputs=small
def one_line(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


# trnlens: inputs=small
def multi_line(x):
    y = (x.pow(2)
         .mean(dim=-1,
               keepdim=True))
    z = torch.rsqrt(
        y + 1e-6
    )
    return x * z


# trnlens: inputs=small
def uses_helpers(x):
    a = square(x)
    return scale(a) + 1
"""

HELPERS = """
import torch


def scale(t):
    return t * 2.0
"""


def lines_by_number(result):
    return {(entry["path"], entry["line"]): entry for entry in result["lines"]}


def test_one_line_expression_carries_all_its_dispatches(make_project):
    root = make_project({"model.py": MODEL, "helpers.py": HELPERS})
    result = run(root, [{"path": "model.py", "qualname": "one_line"}])
    lines = lines_by_number(result)
    line = line_of(root, "model.py", "return x * torch.rsqrt(x.pow(2)")
    assert list(lines) == [("model.py", line)]
    assert lines[("model.py", line)]["dispatches"] == 5 == result["dispatches_per_step"]
    assert sum(e["device_us"] for e in result["lines"]) > 0


def test_multi_line_expression_splits_by_call_line(make_project):
    root = make_project({"model.py": MODEL, "helpers.py": HELPERS})
    result = run(root, [{"path": "model.py", "qualname": "multi_line"}])
    lines = lines_by_number(result)

    def ops_at(needle):
        entry = lines[("model.py", line_of(root, "model.py", needle))]
        return set(entry["ops"])

    assert ops_at("y = (x.pow(2)") == {"aten::pow"}
    assert ops_at(".mean(dim=-1,") == {"aten::mean"}
    assert ops_at("z = torch.rsqrt(") == {"aten::rsqrt"}
    assert ops_at("y + 1e-6") == {"aten::add"}
    assert ops_at("return x * z") == {"aten::mul"}
    assert sum(e["dispatches"] for e in result["lines"]) == result["dispatches_per_step"] == 5


def test_ops_in_helpers_count_on_their_own_lines(make_project):
    root = make_project({"model.py": MODEL, "helpers.py": HELPERS})
    result = run(root, [{"path": "model.py", "qualname": "uses_helpers"}])
    lines = lines_by_number(result)
    helper_same_file = ("model.py", line_of(root, "model.py", "return v.pow(2)"))
    other_file = ("helpers.py", line_of(root, "helpers.py", "return t * 2.0"))
    call_line = ("model.py", line_of(root, "model.py", "return scale(a) + 1"))
    assert lines[helper_same_file]["ops"] == {"aten::pow": 1}
    assert lines[other_file]["ops"] == {"aten::mul": 1}
    # The call line keeps only what it ran itself (the + 1), not its callees' ops.
    assert lines[call_line]["ops"] == {"aten::add": 1}
    assert ("model.py", line_of(root, "model.py", "a = square(x)")) not in lines
