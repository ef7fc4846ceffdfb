"""The module tree as an icicle chart and the library lines table (report/icicle.py), from the
tiny Llama's hand-written attribution result (tests/libraries/fixtures.py), and in Chromium."""

from __future__ import annotations

import re
import shutil
import sys

import pytest
from trnlens.agent import sources
from trnlens.libraries import rules
from trnlens.report import build, icicle
from trnlens.store import Store

from tests import components
from tests.cli.conftest import REPO
from tests.libraries.fixtures import NORMS, llama_result
from tests.report.test_browser import ARTIFACTS, E2E, browser_missing


def _modules_tree() -> dict:
    result = llama_result()
    rules.attach(result)
    return result


def test_modules_hang_under_their_nearest_present_ancestor() -> None:
    result = _modules_tree()
    result["modules"] = [m for m in result["modules"] if m["name"] != "model.model.layers.1"]
    (root,) = icicle.tree(result["modules"])
    assert root.name == "model" and [c.name for c in root.children] == ["model.model"]
    model = root.children[0]
    # layers.1 is not there: its norms hang under model.model, the nearest ancestor present.
    assert sorted(c.name for c in model.children) == [
        "model.model.layers.0", "model.model.layers.1.input_layernorm",
        "model.model.layers.1.post_attention_layernorm", "model.model.norm",
    ]  # fmt: skip
    layer = next(c for c in model.children if c.name == "model.model.layers.0")
    assert sorted(c.name for c in layer.children) == NORMS[:2]


def test_a_root_named_as_named_modules_names_it_holds_the_rest() -> None:
    modules = [{"name": "", "type": "Net", "total_time_per_step_us": 10.0},
               {"name": "fc", "type": "Linear", "total_time_per_step_us": 4.0}]  # fmt: skip
    (root,) = icicle.tree(modules)
    assert [c.name for c in root.children] == ["fc"]
    assert "(root) (Net): 10.0 µs total" in icicle.svg({"modules": modules, "frames": []})


def test_widths_are_shares_of_the_step_and_text_is_escaped() -> None:
    result = _modules_tree()
    result["modules"][0]["type"] = "<script>alert(1)</script>"
    chart = icicle.svg(result)
    assert "<script>" not in chart and "&lt;script&gt;" in chart
    widths = {
        name: float(width)
        for name, width in re.findall(r'data-name="([^"]*)"[^>]*>.*?width="([0-9.]+)"', chart)
    }
    # The step is the attributed 5.00 ms; the root spans its 3.00 ms total: 60% of 1200 px.
    assert abs(widths["model"] - (0.6 * icicle.WIDTH - 1)) < 0.2
    assert abs(widths["model.model.norm"] - (160 / 5000 * icicle.WIDTH - 1)) < 0.2
    assert (
        "model.model.norm (LlamaRMSNorm): 160 µs total, 160 µs self, 1 call, 8 dispatches" in chart
    )


def test_the_section_lists_library_lines_and_findings() -> None:
    page = icicle.section(_modules_tree())
    assert "<h2>Module tree</h2>" in page
    assert "transformers/models/llama/modeling_llama.py</code>" not in page  # path:line
    assert "transformers/models/llama/modeling_llama.py:66</code>" in page
    assert "is a naive RMSNorm: 8 dispatches a call, 5 calls, 40 of 151 per step" in page
    assert icicle.section({"modules": [], "frames": []}) == ""


def test_the_module_tree_renders_in_chromium(tmp_path) -> None:
    missing = browser_missing()
    if missing:
        components.absent(missing)
    root = tmp_path / "project"
    (root / "samples").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    shutil.copy(REPO / "samples" / "tiny_llama.py", root / "samples" / "tiny_llama.py")
    text = (root / "samples" / "tiny_llama.py").read_text()
    result = _modules_tree()
    result["function"]["source_hash"] = sources.source_hash(
        text, sources.find_definition(text, "logits")
    )
    with Store(root) as store:
        store.add(result)
        built = build.write(store, build.select(store, result["run_id"], root), root)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-modules.png"
    import json
    import subprocess

    done = subprocess.run(
        ["node", str(E2E / "report-modules.mjs"), str(built.path), str(shot)],
        cwd=E2E, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["problems"] == [] and seen["foreign"] == []
    by_name = {n["name"]: n for n in seen["nodes"]}
    names = ("model", "model.model", "model.model.layers.0", "model.model.norm")
    assert {*names, *NORMS} <= set(by_name)
    widths = [by_name[n]["width"] for n in names]
    assert widths == sorted(widths, reverse=True) and widths[-1] > 0
    assert by_name["model.model"]["y"] > by_name["model"]["y"]  # children below their parent
    assert seen["libraryRows"] == 5
    assert any("naive RMSNorm" in f for f in seen["findings"])
    assert shot.stat().st_size > 5_000


@pytest.fixture(scope="module")
def training_run(tmp_path_factory):
    """A real fine-tuning step of the tiny Llama (tests/agent/backward/test_finetuning.py's),
    stored in a project: forward and backward on every module."""
    from tests.agent.backward.test_finetuning import TRAIN
    from tests.agent.conftest import forget_modules, run

    before = set(sys.modules)
    root = tmp_path_factory.mktemp("train-report")
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / "train.py").write_text(TRAIN.lstrip("\n"), encoding="utf-8")
    result = run(root, [{"path": "train.py", "qualname": "step"}])
    assert result.get("error") is None, result.get("error")
    yield root, result
    forget_modules("transformers", before)


def _blocks(chart: str) -> dict:
    """(direction, name) -> width of each block of the chart."""
    found = re.findall(
        r'data-name="([^"]*)"[^>]*?(?:data-direction="([^"]*)")?>.*?width="([0-9.]+)"', chart
    )
    return {(direction or None, name): float(width) for name, direction, width in found}


def test_a_training_steps_tree_splits_into_forward_and_backward(training_run) -> None:
    _, result = training_run
    chart = icicle.svg(result)
    blocks = _blocks(chart)
    step = icicle.attributed_us(result)
    model = next(m for m in result["modules"] if m["name"] == "model")
    backward_us = model["total_backward_time_per_step_us"]
    forward_us = model["total_time_per_step_us"] - backward_us
    for direction, part in (("forward", forward_us), ("backward", backward_us)):
        assert abs(blocks[(direction, direction)] - (part / step * icicle.WIDTH - 1)) < 0.2
        assert abs(blocks[(direction, "model")] - blocks[(direction, direction)]) < 0.2
    attention = "model.model.layers.0.self_attn"
    assert {("forward", attention), ("backward", attention)} <= set(blocks)
    assert "self_attn (LlamaAttention) backward of the nodes its forward made" in chart


def test_the_forward_and_backward_tree_renders_in_chromium(training_run) -> None:
    missing = browser_missing()
    if missing:
        components.absent(missing)
    root, result = training_run
    with Store(root) as store:
        store.add(result)
        built = build.write(store, build.select(store, result["run_id"], root), root)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-modules-backward.png"
    import json
    import subprocess

    done = subprocess.run(
        ["node", str(E2E / "report-modules.mjs"), str(built.path), str(shot)],
        cwd=E2E, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["problems"] == [] and seen["foreign"] == []
    by_key = {(n["direction"], n["name"]): n for n in seen["nodes"]}
    for direction in ("forward", "backward"):
        layer = by_key[(direction, "model.model.layers.0")]
        attention = by_key[(direction, "model.model.layers.0.self_attn")]
        assert layer["width"] >= attention["width"] > 0 and attention["y"] > layer["y"]
    # The backward tree stands beside the forward one, on the same rows.
    assert by_key[("backward", "model")]["y"] == by_key[("forward", "model")]["y"]
    assert shot.stat().st_size > 5_000


def _kept_result() -> dict:
    """Two Linear layers' forward and backward times and what each kept for backward."""
    source = {"path": "torch/nn/modules/linear.py", "line": 130}
    modules = [
        {"name": "model", "type": "Sequential", "total_time_per_step_us": 300.0,
         "total_backward_time_per_step_us": 120.0},
        {"name": "model.0", "type": "Linear", "total_time_per_step_us": 200.0,
         "total_backward_time_per_step_us": 80.0, "source": source},
        {"name": "model.1", "type": "ReLU", "total_time_per_step_us": 100.0,
         "total_backward_time_per_step_us": 40.0},
    ]  # fmt: skip
    memory = {
        "device": "cpu", "steps": 2, "basis": "b", "peak_bytes": 9_000, "at_peak": {},
        "growth_per_step_bytes": 0, "growth": [],
        "activations_by_module": [{"module": "model.0", "bytes": 6_000},
                                  {"module": "model.1", "bytes": 2_000},
                                  {"module": "(no module)", "bytes": 2_000}],
    }  # fmt: skip
    return {"modules": modules, "frames": [], "memory": memory}


def test_the_keepers_of_activations_are_listed_with_their_forward_and_backward_time() -> None:
    result = _kept_result()
    table = icicle.keepers_table(result)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.split("<tbody>")[1])
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    # bytes, share of all kept, forward (total less backward), backward, the module
    assert [c[:4] for c in cells] == [
        ["6.0 KB", "60%", "120 µs", "80.0 µs"],
        ["2.0 KB", "20%", "60.0 µs", "40.0 µs"],
        ["2.0 KB", "20%", "-", "-"],
    ]
    assert "model.0</code>" in cells[0][4] and "Linear" in cells[0][4]
    assert "outside any module" in cells[2][4]
    # the row opens the module's class, like the tree's block
    assert 'class="src" data-path="torch/nn/modules/linear.py" data-line="130"' in table
    assert "10.0 KB in all" in table
    # the forward block of a keeper says what it keeps; the backward block does not repeat it
    chart = icicle.svg(result)
    assert "model.0 (Linear) forward: 120 µs total" in chart
    assert "; keeps 6.0 KB of activations for backward" in chart
    assert chart.count("keeps 6.0 KB") == 1
    # and it is in the section, between the tree and the library lines
    assert "Activations kept for backward, by module" in icicle.section(result)


def test_no_memory_pass_no_keepers_table() -> None:
    result = _kept_result()
    result["memory"] = None
    assert icicle.keepers_table(result) == ""
    assert "keeps" not in icicle.svg(result)


def test_a_fine_tuning_steps_keepers_are_its_modules_with_their_times(training_run) -> None:
    _, result = training_run
    table = icicle.keepers_table(result)
    kept = result["memory"]["activations_by_module"]
    named = [k for k in kept[: icicle.MAX_KEEPERS] if k["module"] != "(no module)"]
    assert named and all(f"{k['module']}</code>" in table for k in named)
    # every named keeper is a module of the tree: its row has its two times and opens its class
    modules = {m["name"] for m in result["modules"]}
    assert all(k["module"] in modules for k in named), (named, sorted(modules))
    assert table.count('class="src" data-path=') >= len(named)
