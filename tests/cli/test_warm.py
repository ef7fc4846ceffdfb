"""`trnlens profile --warm`: a daemon keeps one agent warm between CLI calls, then leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from trnlens import warm


def profile_warm(root, keep: str, env) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "trnlens", "profile", "m.py::f", "--warm", keep, "--quiet",
         "--format", "json", "--steps", "2", "--warmup", "1", "--repeats", "2"],
        cwd=root, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_warm_daemon_serves_repeat_calls_then_exits(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(
        "import torch\n\n\ndef f(x=torch.ones(8, 8)):\n    return x + 1\n"
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = dict(os.environ)
    first = profile_warm(tmp_path, "6", env)
    second = profile_warm(tmp_path, "6", env)
    assert any("cold agent" in w for w in first["warnings"])
    assert not any("cold agent" in w for w in second["warnings"])  # torch was already loaded
    assert first["run_id"] != second["run_id"]
    assert first["dispatches_per_step"] == second["dispatches_per_step"] == 1
    runs = list((tmp_path / ".trnlens" / "artifacts").iterdir())
    assert len(runs) == 2  # the daemon stored both in the project's store
    sockets = [warm.socket_path(tmp_path, "local", None)]
    assert sockets[0].exists()
    assert len(sockets) == 1
    deadline = time.monotonic() + 30
    while sockets[0].exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not sockets[0].exists()  # idle past its time: the daemon (and its agent) left
