"""The agent as a process: the shipped bundle, the line protocol, cancel, isolation."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from trnlens.agent.protocol import SCHEMA_VERSION
from trnlens.targets import bundle

from tests.conftest import python_without_trnlens

SLOW = """
import time
import torch

print("user output on stdout must not break the protocol")


def slow(x=torch.ones(64, 64)):
    print("printing inside the measured function")
    for _ in range(200):
        x = torch.tanh(x)
        time.sleep(0.002)
    return x


def quick(x=torch.ones(8)):
    return x + 1
"""


class Agent:
    """An agent process and a reader thread collecting its protocol messages."""

    def __init__(self, command: list[str], cwd: Path, env: dict | None = None):
        self.proc = subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
        )  # fmt: skip
        self.messages: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.stderr: list[str] = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.messages.put(json.loads(line))  # every stdout line must be protocol JSON
        self.messages.put(None)

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def next(self, timeout=120.0, **match) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            message = self.messages.get(timeout=max(deadline - time.monotonic(), 0.01))
            assert message is not None, "agent exited:\n" + "".join(self.stderr[-30:])
            if all(message.get(k) == v for k, v in match.items()):
                return message

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def agent_dir(tmp_path):
    (tmp_path / "slow.py").write_text(textwrap.dedent(SLOW))
    return tmp_path


def request(root: Path, qualname: str, request_id: str, **extra) -> dict:
    return {
        "type": "profile", "id": request_id, "project_root": str(root),
        "variants": [{"path": "slow.py", "qualname": qualname}], "backend": "cpu",
        "warmup": 1, "steps": 2, "repeats": 3, "artifacts_dir": str(root / ".stage"), **extra,
    }  # fmt: skip


def test_bundle_speaks_the_protocol_and_survives_user_prints(agent_dir):
    agent = Agent([sys.executable, str(bundle.build(agent_dir / "cache"))], agent_dir)
    try:
        hello = agent.next(type="hello")
        assert hello["schema_version"] == SCHEMA_VERSION
        agent.send(request(agent_dir, "quick", "a"))
        progress = agent.next(type="progress", id="a")
        assert progress["phase"] == "importing"
        result = agent.next(type="result", id="a")["result"]
        assert result["dispatches_per_step"] == 1
        agent.send({"type": "ping", "id": "p"})
        assert agent.next(type="pong", id="p")["busy"] is None
        agent.proc.stdin.write("this is not json\n")
        agent.proc.stdin.flush()
        assert agent.next(type="error")["error"]["kind"] == "usage"
        agent.send({"type": "shutdown"})
        assert agent.proc.wait(timeout=30) == 0
        assert any("user output on stdout" in line for line in agent.stderr)
    finally:
        agent.close()


def test_cancel_stops_a_run_long_before_its_end_and_the_agent_serves_on(agent_dir):
    agent = Agent([sys.executable, "-m", "trnlens.agent"], agent_dir)
    try:
        agent.next(type="hello")
        agent.send(request(agent_dir, "slow", "long", steps=50, warmup=5))
        agent.next(type="progress", id="long", phase="measuring")
        agent.send({"type": "cancel", "id": "long"})
        # a deadline far below the run's own length (55 calls of 0.4 s and the timing pass)
        error = agent.next(type="error", id="long", timeout=5)
        assert error["error"]["kind"] == "cancelled"
        agent.send(request(agent_dir, "quick", "next"))
        assert agent.next(type="result", id="next")["result"]["error"] is None
    finally:
        agent.close()


SLOW_IMPORTS = """
import importlib
import itertools
import os
import sys

import torch

SITE = os.path.join(os.path.dirname(__file__), ".venv", "lib", "site-packages")
sys.path.insert(0, SITE)
_next = itertools.count()


def imports_a_library(x=torch.ones(8)):
    importlib.import_module(f"slowlib_{next(_next)}")  # 0.2 s of a library's top-level code
    return x + 1


def all_imported_whole(x=torch.ones(8)):
    loaded = [m for name, m in sys.modules.items() if name.startswith("slowlib_")]
    assert loaded and all(getattr(m, "DONE", False) for m in loaded)
    return x + 1
"""


def test_a_cancel_during_a_library_import_waits_for_it_and_keeps_the_agent(agent_dir):
    """Stopping an import half way would cost the warm agent (interrupts.py): the cancel lands
    after it, the answer still comes long before the run would end, and the next run sees whole
    modules."""
    (agent_dir / "imports.py").write_text(SLOW_IMPORTS)
    site = agent_dir / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    importing = agent_dir / "importing"  # written by each library as its import starts
    for n in range(40):
        (site / f"slowlib_{n}.py").write_text(
            f"open({str(importing)!r}, 'w').close()\n"
            "import time\nfor _ in range(20):\n    time.sleep(0.01)\nDONE = True\n"
        )
    agent = Agent([sys.executable, "-m", "trnlens.agent"], agent_dir)
    try:
        agent.next(type="hello")
        run = request(agent_dir, "imports_a_library", "long", steps=20, warmup=2, repeats=1)
        run["variants"][0]["path"] = "imports.py"
        agent.send(run)
        agent.next(type="progress", id="long", phase="warm-up")
        deadline = time.monotonic() + 60
        while not importing.exists():  # inside an import (each is 0.2 s of top-level code)
            assert time.monotonic() < deadline, "no library import started"
            time.sleep(0.01)
        agent.send({"type": "cancel", "id": "long"})
        error = agent.next(type="error", id="long", timeout=5)["error"]  # far below the run's
        assert error["kind"] == "cancelled" and not error.get("exiting")
        check = request(agent_dir, "all_imported_whole", "next")
        check["variants"][0]["path"] = "imports.py"
        agent.send(check)
        assert agent.next(type="result", id="next")["result"]["error"] is None
    finally:
        agent.close()


def test_one_shot_use_is_one_request_then_end_of_input(agent_dir):
    done = subprocess.run(
        [sys.executable, "-m", "trnlens.agent"], cwd=agent_dir, capture_output=True, text=True,
        input=json.dumps(request(agent_dir, "quick", "once")) + "\n", timeout=120,
    )  # fmt: skip
    kinds = [json.loads(line)["type"] for line in done.stdout.splitlines()]
    assert kinds[0] == "hello" and kinds[-1] == "result"
    assert done.returncode == 0


def test_a_finished_agent_still_runs_the_users_exit_handlers(agent_dir):
    """The agent skips the interpreter's teardown (main._quick_exit), not the exit handlers."""
    (agent_dir / "atexit_user.py").write_text(
        "import atexit\nimport pathlib\n\nimport torch\n\n"
        "atexit.register(lambda: pathlib.Path('exit-handler-ran').write_text('yes'))\n\n\n"
        "def f(x=torch.ones(4)):\n    return x + 1\n"
    )
    once = request(agent_dir, "f", "once")
    once["variants"][0]["path"] = "atexit_user.py"
    done = subprocess.run(
        [sys.executable, "-m", "trnlens.agent"], cwd=agent_dir, capture_output=True, text=True,
        input=json.dumps(once) + "\n", timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["type"] == "result"
    assert (agent_dir / "exit-handler-ran").read_text() == "yes"


def test_agent_runs_isolated_where_trnlens_cannot_be_imported(agent_dir, tmp_path):
    python = python_without_trnlens(tmp_path / "isolated-venv")
    check = "import torch\ntry:\n import trnlens\nexcept ImportError:\n print('no trnlens')"
    probe = subprocess.run(
        [python, "-I", "-c", check],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert probe.stdout.strip() == "no trnlens", probe.stderr
    pyz = bundle.build(tmp_path / "cache")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run(
        [python, "-I", str(pyz)], cwd=agent_dir, capture_output=True, text=True, env=env,
        input=json.dumps(request(agent_dir, "quick", "iso")) + "\n", timeout=120,
    )  # fmt: skip
    messages = [json.loads(line) for line in done.stdout.splitlines()]
    assert messages[-1]["type"] == "result", done.stderr
    assert messages[-1]["result"]["dispatches_per_step"] == 1
    assert messages[0]["executable"] == str(python)


def test_bundle_is_cached_by_content(tmp_path):
    first = bundle.build(tmp_path)
    assert bundle.build(tmp_path) == first
    import zipfile

    names = zipfile.ZipFile(first).namelist()
    assert "__main__.py" in names and "trnlens_agent/runner.py" in names
    assert not any(name.startswith("trnlens/") for name in names)


def test_an_interpreter_without_torch_gets_an_environment_error(agent_dir, tmp_path):
    venv = tmp_path / "no-torch"
    python_without_trnlens(venv, with_torch=False)
    done = subprocess.run(
        [venv / "bin" / "python", str(bundle.build(tmp_path / "cache"))], cwd=agent_dir,
        input=json.dumps(request(agent_dir, "quick", "nt")) + "\n", capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    error = json.loads(done.stdout.splitlines()[-1])["error"]
    assert error["kind"] == "environment"
    assert "torch cannot be imported by" in error["message"]
    assert str(venv / "bin" / "python") in error["message"]
