"""`trnlens profile` as a user runs it: output, exit codes, the store, Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import jsonschema
import pytest
from trnlens.results import schema

from tests.cli.conftest import trnlens

FAST = ("--warmup", "1", "--steps", "2", "--repeats", "3")


def test_profile_prints_cpu_labelled_figures_and_stores_the_run(samples):
    done = trnlens("profile", "samples/rmsnorm.py::rmsnorm_naive", *FAST, cwd=samples)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "6 dispatches/step" in out
    assert "CPU (ops)" in out and "time basis: CPU" in out
    assert "NEURON" not in out and "Self CUDA" not in out  # a CPU run claims no device time
    assert "samples/rmsnorm.py:17" in out and "x.pow(2).mean(-1" in out  # the per-line table
    assert "[0] measuring" in done.stderr  # progress phases on stderr
    run_dir = next((samples / ".trnlens" / "artifacts").iterdir())
    assert (run_dir / "trace.json").stat().st_size > 0
    assert json.loads((run_dir / "result.json").read_text())["function"]["qualname"] == (
        "rmsnorm_naive"
    )


def test_json_output_follows_the_schema(samples):
    done = trnlens(
        "profile", "samples/rmsnorm.py::rmsnorm_fused", *FAST, "--format", "json", cwd=samples
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    jsonschema.validate(result, schema())
    assert result["dispatches_per_step"] == 1
    assert result["function"]["path"] == "samples/rmsnorm.py"


def test_raising_code_exits_3_at_the_right_line(tmp_path):
    (tmp_path / "bad.py").write_text(
        textwrap.dedent(
            """
            import torch


            def fails(x=torch.ones(4, 8)):
                return x.view(3, 7)
            """
        )
    )
    done = trnlens("profile", "bad.py::fails", *FAST, cwd=tmp_path)
    assert done.returncode == 3
    assert "error at bad.py:6: RuntimeError" in done.stdout


def test_usage_errors_exit_2(samples):
    assert trnlens("profile", "samples/rmsnorm.py", cwd=samples).returncode == 2
    missing = trnlens("profile", "nope.py::f", cwd=samples)
    assert missing.returncode == 2 and "no such file: nope.py" in missing.stderr
    assert trnlens("profile", "samples/rmsnorm.py::1bad", cwd=samples).returncode == 2
    assert trnlens(cwd=samples).returncode == 2


def test_missing_inputs_exit_2_with_what_to_write(tmp_path):
    (tmp_path / "m.py").write_text("import torch\n\n\ndef f(x, w):\n    return x * w\n")
    done = trnlens("profile", "m.py::f", cwd=tmp_path)
    assert done.returncode == 2
    assert "# trnlens: inputs=f_inputs" in done.stderr
    assert "at m.py:4" in done.stderr


def test_unusable_target_exits_4(samples):
    cuda = trnlens("profile", "samples/rmsnorm.py::rmsnorm_naive", "--backend", "cuda", cwd=samples)
    assert cuda.returncode == 4
    assert "cuda backend is not usable here" in cuda.stderr
    python = trnlens(
        "profile", "samples/rmsnorm.py::rmsnorm_naive", "--python", "/nonexistent/python",
        cwd=samples,
    )  # fmt: skip
    assert python.returncode == 4
    assert "interpreter not found" in python.stderr


def test_ctrl_c_cancels_the_run_and_leaves_no_agent(tmp_path):
    (tmp_path / "slow.py").write_text(
        "import time\nimport torch\n\n\ndef slow(x=torch.ones(4)):\n    time.sleep(0.5)\n"
        "    return x + 1\n"
    )
    cli = subprocess.Popen(
        [sys.executable, "-m", "trnlens", "profile", "slow.py::slow", "--steps", "40"],
        cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    for line in cli.stderr:
        if "measuring" in line:
            break
    agents = subprocess.run(["pgrep", "-P", str(cli.pid)], capture_output=True, text=True)
    assert agents.stdout.split(), "the agent should be running as the CLI's child"
    cli.send_signal(signal.SIGINT)
    cli.communicate(timeout=10)  # a deadline far below the 20 s the 40 steps would take
    assert cli.returncode == 130
    for pid in agents.stdout.split():
        assert subprocess.run(["kill", "-0", pid], capture_output=True).returncode != 0


def test_python_dash_m_and_version():
    done = subprocess.run(
        [sys.executable, "-m", "trnlens", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.startswith("trnlens ")


def test_timeout_stops_the_run(tmp_path):
    (tmp_path / "slow.py").write_text(
        "import time\nimport torch\n\n\ndef slow(x=torch.ones(4)):\n    time.sleep(0.5)\n"
        "    return x + 1\n"
    )
    # the deadline (15 s) is below the 20 s the 40 steps would take: stopped, not finished
    done = trnlens(
        "profile", "slow.py::slow", "--steps", "40", "--timeout", "4", cwd=tmp_path, timeout=15
    )
    assert done.returncode == 3  # the code did not finish: not an environment error (4)
    assert "longer than 4 s and was stopped in phase" in done.stderr
    assert "environment" not in done.stderr


@pytest.mark.slow
def test_compiled_flag_compiles_an_undecorated_function_and_reports_its_graph(samples):
    done = trnlens(
        "profile", "samples/rmsnorm.py::rmsnorm_naive", "--compiled", *FAST, "--format", "json",
        cwd=samples,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    jsonschema.validate(result, schema())
    assert result["variant"]["kind"] == "compiled" and result["dispatches_per_step"] == 1
    info = result["compile"]
    assert info["graphs_per_call"] == 1 and info["breaks"] == [] and info["recompiles"] == []
    assert info["graphs"][0]["op_names"] == ["pow", "mean", "add", "rsqrt", "mul", "mul"]
    assert info["compile_time_us"]["total_us"] > 0
    assert "[0] compiling torch.compile" in done.stderr
