"""The neuron backend against STAND-IN torch_neuronx packages (tests/agent/standin/README.md).

No Trainium exists here: these tests check that trnlens follows the documented recipe
(docs/neuron.md) call by call, and that a missing, placeholder or XLA-era torch-neuronx gets a
clear message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from trnlens.agent.measure import Settings

STANDIN = Path(__file__).parent / "standin"

CODE = """
import json
import os

import torch


def traced(x=torch.ones(16, 16)):
    with open(os.environ["TRNLENS_STANDIN_LOG"], "a") as log:
        log.write(json.dumps({"call": "user function"}) + "\\n")
    return torch.relu(x * 2)
"""


def run_agent(root: Path, standin: str | None, log: Path, backend="neuron", **env_extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if standin:
        env["PYTHONPATH"] = str(STANDIN / standin)
    env["TRNLENS_STANDIN_LOG"] = str(log)
    env.update(env_extra)
    request = {
        "type": "profile", "id": "n", "project_root": str(root), "backend": backend,
        "device": "cpu",  # the stand-in runs no device: tensors stay on the CPU
        "variants": [{"path": "code.py", "qualname": "traced"}],
        "warmup": 2, "steps": 3, "repeats": 2, "options": {"lines": False},
        "artifacts_dir": str(root / "stage"),
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "trnlens.agent"], input=json.dumps(request) + "\n",
        capture_output=True, text=True, env=env, cwd=root, timeout=180,
    )  # fmt: skip
    messages = [json.loads(line) for line in done.stdout.splitlines()]
    assert messages and messages[-1]["type"] in ("result", "error"), done.stderr
    return messages[-1]


@pytest.fixture
def root(tmp_path):
    (tmp_path / "code.py").write_text(textwrap.dedent(CODE))
    return tmp_path


SETTLE_STEPS = Settings.settle_steps


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_follows_the_documented_recipe_call_by_call(root, tmp_path):
    log = tmp_path / "calls.jsonl"
    message = run_agent(root, "neuron", log)
    assert message["type"] == "result", message
    result = message["result"]
    run_dir = root / "stage" / result["run_id"]
    user, sync = {"call": "user function"}, {"call": "torch.neuron.synchronize"}
    expected = [
        {"call": "import torch_neuronx"},
        *[user, sync] * 2,  # warm-up: 2 steps, each synchronised
        {
            "call": "NeuronConfig",
            "modes": ["DEVICE", "RUNTIME"],
            "profile_output_dir": str(run_dir / "neuron"),
            "correlate_device_time": True,
        },
        {"call": "NeuronProfiler", "config": "NeuronConfig"},
    ]
    seen = calls(log)
    assert seen[: len(expected)] == expected
    # The profiler's own warm-up steps (one, and more while steps still fault in fresh host
    # memory: at most settle_steps), then the 3 active steps, each synchronised.
    profiled = seen[len(expected) : seen.index({"call": "NeuronProfiler.export_trace",
                                                "profiler": "profile"})]  # fmt: skip
    assert profiled == [user, sync] * (len(profiled) // 2)
    assert 4 <= len(profiled) // 2 <= 4 + SETTLE_STEPS
    after = seen[len(expected) + len(profiled) + 1 :]
    # The device-memory step; the timing pass (a settling call or more, then 2 repeats),
    # synchronised, without the profiler. No step after: a comparison keeps the first call's
    # output (made from the snapshot of the inputs, runner.py).
    assert after == [user, sync] * (len(after) // 2)
    assert 1 + 1 + 2 <= len(after) // 2 <= 1 + 1 + SETTLE_STEPS + 2
    assert result["backend"] == "neuron"
    assert result["time_basis"] == "device"
    assert result["versions"]["torch_neuronx"] == "2.14.0+standin"
    assert result["device"] == "cpu, 2 NeuronCores visible"
    kinds = sorted(a["kind"] for a in result["artifacts"])
    assert kinds == ["chrome_trace", "neff", "ntff", "runtime_trace", "runtime_trace"]
    for artifact in result["artifacts"]:
        assert (run_dir / artifact["path"]).is_file()
    # The stand-in ran on the CPU, so no device time: the result must say so, not show zeros.
    assert any("device time is empty on neuron" in w for w in result["warnings"])


def test_auto_prefers_neuron_when_torch_neuronx_sees_a_device(root, tmp_path):
    message = run_agent(root, "neuron", tmp_path / "calls.jsonl", backend="auto")
    assert message["result"]["backend"] == "neuron"


def test_without_correlate_device_time_falls_back_and_warns(root, tmp_path):
    log = tmp_path / "calls.jsonl"
    message = run_agent(root, "neuron", log, TRNLENS_STANDIN_NO_CORRELATE="1")
    result = message["result"]
    config = next(c for c in calls(log) if c["call"] == "NeuronConfig")
    assert "correlate_device_time" not in config
    assert any("no correlate_device_time" in w for w in result["warnings"])


def test_missing_torch_neuronx_says_how_to_install(root, tmp_path):
    message = run_agent(root, None, tmp_path / "calls.jsonl")
    assert message["type"] == "error"
    error = message["error"]
    assert error["kind"] == "environment"
    assert "torch_neuronx, which is not installed" in error["message"]
    assert "torch-neuronx==2.14.*" in error["message"]
    assert error["traceback"] is None


def test_placeholder_package_is_named_as_such(root, tmp_path):
    message = run_agent(root, "placeholder", tmp_path / "calls.jsonl")
    error = message["error"]
    assert error["kind"] == "environment"
    assert "placeholder package" in error["message"]
    assert "pip uninstall torch-neuronx" in error["message"]


def test_auto_skips_a_placeholder_and_says_why(root, tmp_path):
    message = run_agent(root, "placeholder", tmp_path / "calls.jsonl", backend="auto")
    result = message["result"]
    assert result["backend"] == "cpu"
    assert any("placeholder package" in w and "using cpu" in w for w in result["warnings"])
