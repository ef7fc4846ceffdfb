"""The agent's xla backend on the real torch-xla (CPU PJRT): the five things issue 31 must show.

One agent process answers all the requests (torch-xla imports once, as in a warm agent), each
a run of a function of fixtures/steps.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
from trnlens.results import schema

from tests.xla.conftest import REPO, STANDIN, xla_env

FIXTURE = Path(__file__).parent / "fixtures" / "steps.py"
FUNCTIONS = ("steady", "growing", "fallback", "host_read", "broken", "sliced", "refuses_modes")


def run_agent(python: Path, root: Path, requests: list[dict], **env: str) -> dict[str, dict]:
    """The agent (in place, from server/) answering ``requests``; the last message of each id."""
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run(
        [str(python), "-m", "trnlens.agent"], input=lines, capture_output=True, text=True,
        env=xla_env(**{"PYTHONPATH": str(REPO / "server"), **env}), cwd=root, timeout=900,
    )  # fmt: skip
    answers: dict[str, dict] = {}
    for line in done.stdout.splitlines():
        message = json.loads(line)
        if message["type"] in ("result", "error"):
            answers[message["id"]] = message
    assert len(answers) == len(requests), done.stderr[-3000:]
    return answers


def request(root: Path, qualname: str, backend: str = "xla") -> dict:
    return {
        "type": "profile", "id": qualname, "project_root": str(root), "backend": backend,
        "variants": [{"path": "steps.py", "qualname": qualname}],
        "warmup": 2, "steps": 3, "repeats": 3, "artifacts_dir": str(root / "stage"),
    }  # fmt: skip


@pytest.fixture(scope="module")
def results(xla_python, tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("xla")
    shutil.copy(FIXTURE, root / "steps.py")
    return run_agent(xla_python, root, [request(root, name) for name in FUNCTIONS])


def xla_of(results: dict, name: str) -> dict:
    message = results[name]
    assert message["type"] == "result", message
    result = message["result"]
    assert result["error"] is None, result["error"]
    jsonschema.validate(result, schema())
    assert result["backend"] == "xla" and result["schema_version"] == 4
    assert result["versions"]["torch_xla"] and result["versions"]["pjrt_device"] == "CPU"
    return result["xla"]


def test_a_steady_step_is_one_graph_with_no_compilation_in_the_window(results):
    x = xla_of(results, "steady")
    assert x["per_step"]["graphs"] == 1
    assert x["compiles_in_window"] == 0 and x["recompiles"] == []
    assert x["per_step"]["cache_hits"] == 1 and x["first_call"]["compiles"] == 1
    assert x["fallbacks"] == [] and x["forced"] == []
    assert "no compilation in the measured window" in x["message"]
    by_line = {line["line"]: line for line in x["lines"]}
    assert by_line[14]["graphs"] == [1] and by_line[14]["ir_nodes"] > 0  # y = x * 2 + 1


def test_a_length_that_changes_every_call_recompiles_every_step_at_its_line(results):
    x = xla_of(results, "growing")
    assert x["recompiles_every_step"] is True
    assert x["compiles_in_window"] == x["window_steps"] > 0
    measured = [r for r in x["recompiles"] if r["phase"] == "measured"]
    assert measured and all((r["path"], r["line"]) == ("steps.py", 21) for r in measured)
    assert measured[0]["kind"] == "shape" and "->" in measured[0]["detail"]
    warmup = [r for r in x["recompiles"] if r["phase"] == "warmup"]
    assert warmup and warmup[0]["line"] == 21  # the second warm-up call recompiled too
    assert "RECOMPILES EVERY STEP" in x["message"] and "steps.py:21" in x["message"]


def test_a_sliced_length_recompiles_at_the_slice_with_its_shapes_and_advice(results):
    """A view's IR node can be made at its first use, the line after ``x = x[:, :length]``
    (issue 40; origin.py, tests/agent/xla/test_origin.py): the cause is the slice's line."""
    x = xla_of(results, "sliced")
    text = FIXTURE.read_text().splitlines()
    made = next(n for n, line in enumerate(text, 1) if line.strip() == "x = x[:, :length]")
    measured = [r for r in x["recompiles"] if r["phase"] == "measured"]
    assert measured and measured[0]["line"] == made, measured
    if "used_at" in measured[0]:  # the view's node was made at its use (origin.py found it)
        assert measured[0]["used_at"] == made + 1
    assert len(measured[0]["shapes"]) >= 2  # a new length every call
    assert "pad the varying length to a few bucket sizes" in measured[0]["advice"]


def test_a_step_the_sites_step_cannot_run_keeps_its_figures_and_says_what_it_skipped(results):
    """Issue 40: no internal error for a step the tool cannot read line by line."""
    x = xla_of(results, "refuses_modes")
    assert x["per_step"]["graphs"] == 1 and x["compiles_in_window"] == 0
    assert x["lines"] == [] and "modules" not in x
    (skipped,) = x["skipped"]
    assert "this step cannot run under a dispatch mode" in skipped and "RuntimeError" in skipped
    assert "not read: lines, modules, fallbacks and forced executions" in x["message"]


def test_nonzero_is_a_cpu_fallback_at_its_line(results):
    x = xla_of(results, "fallback")
    assert {"op": "aten::nonzero", "count": 1, "path": "steps.py", "line": 28} in x["fallbacks"]
    assert x["per_step"]["fallback_ops"] == 1
    # Its data-dependent shape also cuts the graph there: two graphs per step.
    assert x["per_step"]["graphs"] == 2
    assert any(f["line"] == 28 and f["op"] == "aten::nonzero" for f in x["forced"])


def test_item_in_the_step_is_a_forced_execution_at_its_line(results):
    x = xla_of(results, "host_read")
    forced = [f for f in x["forced"] if f["op"] == "aten::_local_scalar_dense"]
    assert forced == [
        {
            "op": "aten::_local_scalar_dense",
            "executions": 1,
            "path": "steps.py",
            "line": 35,
            "why": forced[0]["why"],
            "advice": forced[0]["advice"],
        }  # fmt: skip
    ]
    assert ".item()" in forced[0]["why"] and "xm.add_step_closure" in forced[0]["advice"]
    assert x["per_step"]["host_reads"] == 1 and x["per_step"]["graphs"] == 2
    assert x["fallbacks"] == []  # a host read is not a missing lowering
    lines = {line["line"]: line["graphs"] for line in x["lines"]}
    assert lines[34] == [1] and lines[36] == [2]  # before the read: graph 1; after it: graph 2


def test_a_failure_inside_the_xla_step_gives_the_users_line(results):
    result = results["broken"]["result"]
    error = result["error"]
    assert error["kind"] == "user_code"
    assert (error["path"], error["line"]) == ("steps.py", 42)
    assert "is invalid for input of size" in error["message"]


def test_neuron_backend_profiles_the_xla_based_torch_neuronx_on_its_xla_stack(xla_python, tmp_path):
    """Before issue 31: "torch-neuronx ... is the older XLA-based package ...: trnlens needs
    TorchNeuron". Now --backend neuron takes its XLA stack (torch_neuronx is a stand-in: it
    cannot be installed here; torch-xla is real)."""
    shutil.copy(FIXTURE, tmp_path / "steps.py")
    answers = run_agent(
        xla_python, tmp_path, [request(tmp_path, "steady", backend="neuron")],
        PYTHONPATH=f"{STANDIN}:{REPO / 'server'}",
    )  # fmt: skip
    result = answers["steady"]["result"]
    assert result["backend"] == "xla" and result["versions"]["torch_neuronx"] == "2.8.0.2.10.16998"
    assert any("XLA-based package" in w for w in result["warnings"])
    assert result["xla"]["per_step"]["graphs"] == 1
    # torch_neuronx imports torch_xla: XLA_IR_DEBUG was set before, so IR nodes have lines
    assert result["xla"]["ir_debug"] is True
    assert not any("XLA_IR_DEBUG" in w for w in result["warnings"])
    assert {line["line"]: line["ir_nodes"] for line in result["xla"]["lines"]}[14] > 0


def test_the_shipped_agent_bundle_carries_the_xla_subpackage_and_runs_it(xla_python, tmp_path):
    """Remote targets run the zipapp (targets/bundle.py): it holds agent/xla/ and runs the xla
    backend where trnlens is not installed (no PYTHONPATH to server/)."""
    import zipfile

    from trnlens.targets import bundle

    built = bundle.build(tmp_path)
    names = zipfile.ZipFile(built).namelist()
    for module in ("recorder", "sites", "summary", "irtext", "metrics"):
        assert f"trnlens_agent/xla/{module}.py" in names
    assert "trnlens_agent/backends/xla.py" in names
    shutil.copy(FIXTURE, tmp_path / "steps.py")
    lines = json.dumps(request(tmp_path, "host_read")) + "\n"
    done = subprocess.run(
        [str(xla_python), "-I", str(built)], input=lines, capture_output=True, text=True,
        env=xla_env(), cwd=tmp_path, timeout=900,
    )  # fmt: skip
    result = json.loads(done.stdout.splitlines()[-1])["result"]
    assert result["xla"]["forced"][0]["line"] == 35, done.stderr[-2000:]


def test_neuron_without_torch_neuronx_points_at_the_xla_backend(xla_python, tmp_path):
    """What a user of torch 2.8 + torch-xla saw before (issue 31): only "the neuron backend
    needs torch_neuronx, which is not installed"; now the same message names --backend xla."""
    shutil.copy(FIXTURE, tmp_path / "steps.py")
    answers = run_agent(xla_python, tmp_path, [request(tmp_path, "steady", backend="neuron")])
    error = answers["steady"]["error"]
    assert error["kind"] == "environment"
    assert "needs torch_neuronx, which is not installed" in error["message"]
    assert "--backend xla" in error["message"]
