"""Warm agents: one process across runs, reloading what changed, isolated runs, replacements."""

from __future__ import annotations

import asyncio
import os
import signal
import textwrap
import time
from pathlib import Path

import pytest
from trnlens.jobs import AgentProcess, ProfileRequest, run_profile
from trnlens.store import Store
from trnlens.targets.local import LocalTarget

FAST = {"backend": "cpu", "warmup": 1, "steps": 2, "repeats": 3}

MODEL = """
import torch

from helpers import SCALE, double


def f(x=torch.ones(64, 64)):
    return double(x) * SCALE
"""

HELPERS = """
SCALE = 2.0


def double(t):
    return t * 2
"""


def write(root: Path, name: str, text: str) -> None:
    (root / name).write_text(textwrap.dedent(text).lstrip())


class Session:
    """A warm agent and a store for one project, driven the way the editor drives them."""

    def __init__(self, root: Path, **agent_options):
        self.root = root
        self.agent = AgentProcess(LocalTarget(), **agent_options)
        self.store = Store(root)

    async def profile(self, qualname: str, path: str = "model.py", **kw) -> dict:
        request = ProfileRequest(
            variants=[{"path": str(self.root / path), "qualname": qualname}],
            project_root=self.root, **{**FAST, **kw},
        )  # fmt: skip
        outcome = await run_profile(request, self.store, self.agent.target, agent=self.agent)
        return outcome.data

    async def close(self):
        await self.agent.close()
        self.store.close()


@pytest.fixture
def root(tmp_path):
    write(tmp_path, "pyproject.toml", "")
    write(tmp_path, "model.py", MODEL)
    write(tmp_path, "helpers.py", HELPERS)
    return tmp_path


def ops(result) -> dict:
    return {op["name"]: op["calls"] for op in result["ops"]}


async def test_one_process_reloads_exactly_what_changed(root):
    session = Session(root)
    try:
        first = await session.profile("f")
        pid = session.agent.proc.pid
        assert first["dispatches_per_step"] == 2
        again = await session.profile("f")
        assert session.agent.proc.pid == pid  # the same warm process
        assert not any("reloaded" in w for w in again["warnings"])  # nothing changed
        assert again["run_id"] != first["run_id"]
        assert again["created_at"] != first["created_at"]

        # Edit the function itself.
        write(
            root, "model.py", MODEL.replace("return double(x) * SCALE", "return double(x) + SCALE")
        )
        edited = await session.profile("f")
        assert "aten::add" in ops(edited) and "aten::mul" in ops(edited)
        assert any("reloaded 1 changed module: model" in w for w in edited["warnings"])

        # Edit a helper module it imports: the helper and its importer are reloaded.
        write(root, "helpers.py", HELPERS.replace("return t * 2", "return t.exp()"))
        helper = await session.profile("f")
        assert "aten::exp" in ops(helper)
        assert any("reloaded 2 changed modules: helpers, model" in w for w in helper["warnings"])

        # Change a module-level constant the function imported by value.
        write(root, "helpers.py", HELPERS.replace("return t * 2", "return t.exp()").replace(
            "SCALE = 2.0", "SCALE = 1"))  # fmt: skip
        constant = await session.profile("f")
        assert constant["inputs"] == helper["inputs"]
        assert any("helpers, model" in w for w in constant["warnings"])

        # Add a function and profile it at once.
        write(root, "model.py", MODEL + "\n\ndef g(x=torch.ones(4)):\n    return x.sin()\n")
        added = await session.profile("g")
        assert ops(added).get("aten::sin") == 1
        assert session.agent.proc.pid == pid
    finally:
        await session.close()


LEAKY = """
import torch

KEPT = []


def leaks(x=torch.ones(256, 1024)):
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    KEPT.append(torch.empty(8 * 1024 * 1024))  # keeps 64 MB per call, never freed
    return x + 1
"""

CLEAN = """
import torch


def clean_inputs():
    with open("threads.txt", "a") as log:
        log.write(f"{torch.get_num_threads()} {torch.get_default_dtype()}\\n")
    return (torch.ones(256, 1024),)


# trnlens: inputs=clean_inputs
def clean(x):
    return (x * 2).sum(-1)
"""


async def test_a_leaky_run_does_not_change_the_next_runs_figures(root, monkeypatch):
    write(root, "leaky.py", LEAKY)
    write(root, "clean.py", CLEAN)
    monkeypatch.chdir(root)  # the factory logs to threads.txt in the working directory
    fresh = Session(root)
    try:
        baseline = await fresh.profile("clean", path="clean.py")
    finally:
        await fresh.close()
    session = Session(root)
    try:
        await session.profile("leaks", path="leaky.py")
        after = await session.profile("clean", path="clean.py")
    finally:
        await session.close()
    logged = (root / "threads.txt").read_text().splitlines()
    assert logged[0] == logged[-1]  # the thread count and default dtype were restored
    assert "torch.float32" in logged[-1]
    assert after["inputs"] == baseline["inputs"]
    assert after["dispatches_per_step"] == baseline["dispatches_per_step"]
    assert after["peak_memory_bytes"] == baseline["peak_memory_bytes"]
    assert ops(after) == ops(baseline)


async def test_a_module_imported_by_a_refused_run_is_reloaded_when_it_changes(root):
    # A run stopped by a usage error (here: no inputs) after importing the file; the file then
    # gets its factory (the editor's quick fix): the next run must import the new text.
    from trnlens.jobs import AgentFailure

    write(root, "needs.py", "import torch\n\n\ndef scale(x, w):\n    return torch.mul(x, w)\n")
    session = Session(root)
    try:
        with pytest.raises(AgentFailure, match="needs arguments"):
            await session.profile("scale", path="needs.py")
        write(root, "needs.py", """
            import torch


            def scale_inputs():
                return (torch.randn(8, 64), torch.randn(64))


            # trnlens: inputs=scale_inputs
            def scale(x, w):
                return torch.mul(x, w)
            """)  # fmt: skip
        result = await session.profile("scale", path="needs.py")
    finally:
        await session.close()
    assert result["error"] is None and result["dispatches_per_step"] == 1


async def test_a_crashed_agent_is_replaced_and_the_run_retried(root):
    write(root, "crash.py", """
        import os
        import torch


        def once(x=torch.ones(4)):
            marker = os.path.join(os.path.dirname(__file__), "crashed-once")
            if not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(3)
            return x + 1
    """)  # fmt: skip
    session = Session(root)
    try:
        result = await session.profile("once", path="crash.py")
    finally:
        await session.close()
    assert result["error"] is None and result["dispatches_per_step"] == 1
    assert any("replaced by a fresh process" in w and "exited (code 3)" in w
               for w in result["warnings"])  # fmt: skip


async def test_a_hung_agent_is_killed_and_the_run_retried(root):
    session = Session(root, stall_s=1.5)
    try:
        await session.profile("f")  # warm
        stopped = []

        async def stop_it():
            while not session.agent.alive():
                await asyncio.sleep(0.01)
            pid = session.agent.proc.pid
            os.kill(pid, signal.SIGSTOP)  # a hang: no answer, not even to pings
            stopped.append(pid)

        request = session.profile("f")
        _, result = await asyncio.gather(stop_it(), request)
        assert stopped and session.agent.proc.pid != stopped[0]
        assert any("stopped answering" in w for w in result["warnings"])
        with pytest.raises(ProcessLookupError):  # the hung process was killed, not left behind
            os.kill(stopped[0], 0)
    finally:
        await session.close()


async def test_changed_compile_settings_get_a_fresh_process(root):
    write(root, "compiled.py", """
        import torch

        torch._dynamo.config.cache_size_limit = 4


        @torch.compile
        def c(x=torch.ones(8)):
            return x * 2 + 1
    """)  # fmt: skip
    session = Session(root)
    try:
        await session.profile("c", path="compiled.py")
        pid = session.agent.proc.pid
        text = (
            (root / "compiled.py")
            .read_text()
            .replace("cache_size_limit = 4", "cache_size_limit = 6")
        )
        (root / "compiled.py").write_text(text)
        second = await session.profile("c", path="compiled.py")
        assert session.agent.proc.pid != pid
        assert any("torch.compile settings changed" in w for w in second["warnings"])
        assert second["dispatches_per_step"] == 1
    finally:
        await session.close()


async def test_idle_agent_shuts_down(root):
    session = Session(root, idle_timeout_s=0.5)
    try:
        await session.profile("f")
        assert session.agent.alive()
        deadline = time.monotonic() + 60  # a busy machine takes its time to end a torch process
        while session.agent.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not session.agent.alive()
        again = await session.profile("f")  # started again on demand
        assert again["error"] is None
    finally:
        await session.close()
