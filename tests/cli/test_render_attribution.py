"""The CLI's Modules table and Library lines (render_attribution.py), from real runs."""

from __future__ import annotations

import json

import jsonschema
import torch
from trnlens.agent.protocol import SCHEMA_VERSION
from trnlens.cli.render import render_result
from trnlens.results import schema

from tests.agent.conftest import line_of, run
from tests.cli.conftest import trnlens

NET = """
import torch
from torch import nn


def build():
    net = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.Sequential(nn.Linear(32, 4)))
    return net, torch.randn(8, 16)


# trnlens: inputs=build
def infer(net, x):
    return net(x)
"""


def _section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def test_modules_table_lists_the_tree_by_the_names_the_inputs_give(make_project):
    root = make_project({"model.py": NET})
    result = run(root, [{"path": "model.py", "qualname": "infer"}])
    table = _section(render_result(result, modules=None), "Modules")
    names = [row.split()[0] for row in table[3:]]
    assert names == ["net", "net.0", "net.1", "net.2", "net.2.0"]  # the call tree's preorder
    row = next(r for r in table if r.split()[0] == "net.1").split()
    assert row[1:5] == ["LayerNorm", "1", "1", "1"]  # type, calls, self and total dispatches
    top = _section(render_result(result, modules=2), "Modules")
    assert "the top 2 by total time" in top[0]
    assert top[-1].strip() == "... 3 more modules (trnlens profile --modules all lists them)"


def test_library_lines_name_the_library_and_the_calling_line(make_project):
    root = make_project({"model.py": NET})
    result = run(root, [{"path": "model.py", "qualname": "infer"}])
    lines = _section(render_result(result), "Library lines")
    linear = next(r for r in lines if "torch/nn/modules/linear.py:" in r)
    assert f"torch {torch.__version__}" in linear
    assert f"model.py:{line_of(root, 'model.py', 'return net(x)')}" in linear
    assert "F.linear(input, self.weight, self.bias)" in linear
    assert "2" in linear.split()  # two Linear calls on that one library line


def test_a_run_without_attribution_prints_neither_section(make_project):
    root = make_project({"model.py": NET})
    result = run(root, [{"path": "model.py", "qualname": "infer"}], options={"lines": False})
    text = render_result(result)
    assert "Modules (" not in text and "Library lines" not in text


def test_profile_modules_all_keeps_every_module_in_the_json(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "model.py").write_text(NET.lstrip("\n"))
    done = trnlens("profile", "model.py::infer", "--modules", "all", "--steps", "2",
                   "--warmup", "1", "--repeats", "3", "--format", "json", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    jsonschema.validate(result, schema())
    assert result["schema_version"] == SCHEMA_VERSION
    assert [m["name"] for m in result["modules"]] == ["net", "net.0", "net.1", "net.2", "net.2.0"]
    assert result["modules_rest"]["count"] == 0


def test_profile_modules_takes_a_number_or_all(tmp_path):
    (tmp_path / "model.py").write_text(NET.lstrip("\n"))
    done = trnlens("profile", "model.py::infer", "--modules", "none", cwd=tmp_path)
    assert done.returncode == 2
    assert "--modules takes a positive number or 'all', got 'none'" in done.stderr


TRAIN = """
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 4))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    return net, opt, torch.randn(8, 16)


# trnlens: inputs=build
def train(net, opt, x):
    loss = net(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
"""


def test_a_training_steps_tables_split_forward_and_backward(make_project):
    root = make_project({"train.py": TRAIN})
    result = run(root, [{"path": "train.py", "qualname": "train"}])
    text = render_result(result, modules=None)
    table = _section(text, "Modules")
    assert "Total disp.  Fwd disp.  Bwd disp." in table[1] and "Bwd time" in table[1]
    for row in result["modules"]:
        cells = next(r for r in table[3:] if r.split()[0] == row["name"]).split()
        back = row["total_backward_dispatches_per_step"]
        total = row["total_dispatches_per_step"]
        assert cells[4:7] == [f"{total:g}", f"{total - back:g}", f"{back:g}"]
    assert {m["name"]: m["total_backward_dispatches_per_step"] > 0 for m in result["modules"]} == {
        "net": True, "net.0": True, "net.1": True, "net.2": True,
    }  # fmt: skip
    lines = _section(text, "Lines")
    forward = next(r for r in lines if f"train.py:{line_of(root, 'train.py', 'net(x)')}" in r)
    entry = next(e for e in result["lines"] if e["line"] == line_of(root, "train.py", "net(x)"))
    assert f"{entry['backward']['dispatches']:g}" in forward.split()
    library = _section(text, "Library lines")
    assert "Bwd" in library[1].split()
