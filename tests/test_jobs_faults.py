"""Agent faults (issue 13): user code that raises, crashes in C, exhausts memory, hangs, forks,
floods its output, returns nonsense, exits, closes fd 1 or changes directory.

Every fault runs on one warm agent, as the language server keeps it (jobs.AgentProcess), against
the real agent and torch. Each run ends with a clear message naming the file:line where there is
one; the agent is replaced when it died; no process is left in any agent's process group; the
runs stored before the faults are all still there afterwards.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trnlens.jobs import AgentFailure, AgentProcess, ProfileRequest, run_profile
from trnlens.store import Store
from trnlens.targets.local import LocalTarget

pytestmark = pytest.mark.slow

# The agent's address space is capped (TRNLENS_MEMORY_LIMIT_MB) so that the memory hog fails
# fast with a MemoryError instead of pushing this shared machine into swap.
MEMORY_LIMIT_MB = "2500"

FAULTS = """\
import ctypes
import os
import subprocess
import sys
import time

import torch


def fine(x=torch.ones(8, 8)):
    return x * 2


def raises(x=torch.ones(8, 8)):
    y = x + 1
    raise ValueError("boom")  # RAISES


def aborts(x=torch.ones(8, 8)):
    os.abort()  # ABORTS


def segfaults(x=torch.ones(8, 8)):
    return ctypes.string_at(0)  # SEGFAULTS


def eats_memory(x=torch.ones(8, 8)):
    hog = []
    while True:
        hog.append(bytearray(64 << 20))  # EATS


def hangs(x=torch.ones(8, 8)):
    time.sleep(600)  # HANGS


def forks(x=torch.ones(8, 8)):
    subprocess.Popen(["sleep", "600"])  # never waited for
    return x + 1


def prints(x=torch.ones(8, 8)):
    sys.stdout.write("o" * (3 << 20))  # one 3 MB line, then many short ones
    sys.stderr.write("e" * (3 << 20) + "\\n")
    for i in range(20000):
        print("line", i)
    return x + 1


def returns_junk(x=torch.ones(8, 8)):
    x + 1
    return {"a": object(), "b": [1, "two", None]}


def exits(x=torch.ones(8, 8)):
    sys.exit(3)  # EXITS


def closes_stdout(x=torch.ones(8, 8)):
    os.write(1, b"before\\n")  # CLOSED: the second call writes to the fd the first closed
    os.close(1)
    return x + 1


def changes_directory(x=torch.ones(8, 8)):
    os.chdir("/")
    return x + 1


def prints_after(x=torch.ones(8, 8)):
    os.write(1, b"fd 1 works again\\n")
    return x - 1
"""


def line_of(marker: str) -> int:
    return next(i for i, text in enumerate(FAULTS.splitlines(), 1) if f"# {marker}" in text)


def group_members(pgids: set[int]) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) in pgids and fields[0] != "Z":
            found.append(f"{entry.name}: {(entry / 'cmdline').read_bytes()!r}")
    return found


class Session:
    """The warm agent and the store, as the language server holds them."""

    def __init__(self, root: Path):
        self.root = root
        env = {"TRNLENS_MEMORY_LIMIT_MB": MEMORY_LIMIT_MB}
        self.target = LocalTarget(env=env)
        self.agent = AgentProcess(self.target, stall_s=30)
        self.store = Store(root)
        self.pgids: set[int] = set()
        self.stored: list[str] = []

    async def profile(self, qualname: str, timeout_s: float | None = None) -> dict:
        request = ProfileRequest(
            variants=[{"path": "faults.py", "qualname": qualname}], project_root=self.root,
            warmup=1, steps=1, repeats=2, timeout_s=timeout_s,
        )  # fmt: skip
        try:
            outcome = (await run_profile(request, self.store, self.target, agent=self.agent)).data
        finally:
            if self.agent.proc is not None:
                self.pgids.add(self.agent.proc.pid)
        self.stored.append(outcome["run_id"])
        return outcome

    async def failure(self, qualname: str, **kwargs) -> dict:
        with pytest.raises(AgentFailure) as caught:
            await self.profile(qualname, **kwargs)
        return caught.value.error


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "faults.py").write_text(FAULTS)
    return tmp_path


async def test_every_fault_ends_clearly_and_loses_nothing(project):
    s = Session(project)
    try:
        assert (await s.profile("fine"))["error"] is None
        first_pid = s.agent.proc.pid

        raised = (await s.profile("raises"))["error"]
        assert (raised["path"], raised["line"]) == ("faults.py", line_of("RAISES"))
        assert "ValueError: boom" in raised["message"]
        assert s.agent.proc.pid == first_pid  # user errors keep the warm agent

        for qualname, marker, how in (("aborts", "ABORTS", "SIGABRT"),
                                      ("segfaults", "SEGFAULTS", "SIGSEGV")):  # fmt: skip
            pid = s.agent.proc.pid
            error = await s.failure(qualname)
            assert how in error["message"], error["message"]
            assert (error["path"], error["line"]) == ("faults.py", line_of(marker))
            assert f"faults.py:{line_of(marker)}" in error["message"]
            assert not s.agent.alive() or s.agent.proc.pid != pid  # replaced, not reused

        memory = (await s.profile("eats_memory"))["error"]
        assert memory["type"] == "MemoryError", memory
        assert (memory["path"], memory["line"]) == ("faults.py", line_of("EATS"))

        hang = await s.failure("hangs", timeout_s=8)
        assert "took longer than 8 s" in hang["message"]
        assert not s.agent.alive()  # killed with its process group

        forked = await s.profile("forks")
        assert forked["error"] is None

        flood = await s.profile("prints")
        assert flood["error"] is None
        assert all(len(line) <= 2000 for line in s.agent._stderr)  # bounded, and still read

        junk = await s.profile("returns_junk")
        assert junk["error"] is None  # nothing to compare: measured all the same

        exited = (await s.profile("exits"))["error"]
        assert (exited["path"], exited["line"]) == ("faults.py", line_of("EXITS"))
        assert "sys.exit(3)" in exited["message"]

        pid = s.agent.proc.pid
        closed = (await s.profile("closes_stdout"))["error"]
        assert (closed["path"], closed["line"]) == ("faults.py", line_of("CLOSED"))
        assert "Bad file descriptor" in closed["message"]  # (the first call's write, too)
        assert (await s.profile("changes_directory"))["error"] is None
        after = await s.profile("prints_after")  # fd 1 and the directory were put back
        assert after["error"] is None and s.agent.proc.pid == pid
        assert any("fd 1 works again" in line for line in s.agent._stderr)
        assert (await s.profile("fine"))["error"] is None
    finally:
        await s.agent.close()
    # The `sleep 600`s that `forks` left went with its agent's process group. SIGKILL lands
    # when each is next scheduled: a dozen of them on two cores may take a moment.
    deadline = time.monotonic() + 5
    while group_members(s.pgids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(s.pgids) == []
    with Store(project) as store:
        kept = {run["run_id"] for run in store.runs(limit=1000)}
    assert set(s.stored) <= kept
    assert len(s.stored) == 11


def test_cli_names_the_crashing_line(project):
    """The CLI, one-shot: a segfault in user code is reported at its line, exit code non-zero."""
    done = subprocess.run(
        [sys.executable, "-m", "trnlens", "profile", "faults.py::segfaults", "--quiet",
         "--warmup", "1", "--steps", "1", "--repeats", "1"],
        cwd=project, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TRNLENS_MEMORY_LIMIT_MB": MEMORY_LIMIT_MB},
    )  # fmt: skip
    assert done.returncode != 0
    assert f"at faults.py:{line_of('SEGFAULTS')}" in done.stderr, done.stderr
    assert "SIGSEGV" in done.stderr


def test_agent_dies_at_start_under_a_tiny_memory_limit(project):
    """A limit too small for torch itself: a clear start failure, not a hang."""

    async def go():
        agent = AgentProcess(LocalTarget(env={"TRNLENS_MEMORY_LIMIT_MB": "60"}))
        request = ProfileRequest(variants=[{"path": "faults.py", "qualname": "fine"}],
                                 project_root=project, warmup=1, steps=1, repeats=1)  # fmt: skip
        with Store(project) as store, pytest.raises(AgentFailure) as caught:
            await run_profile(request, store, agent.target, agent=agent)
        await agent.close()
        return caught.value.error

    error = asyncio.run(go())
    assert "TRNLENS_MEMORY_LIMIT_MB=60) is too small to import torch" in error["message"], error
