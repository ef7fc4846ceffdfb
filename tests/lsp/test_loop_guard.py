"""The loop guard (loop_guard.py) that every e2e server runs under: it reports a blocking call
made on the event loop's thread and a CPU-bound stall, and nothing done in a worker thread."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).parent
GUARD = [sys.executable, str(HERE / "guard.py"), "--exec"]


def guarded(tmp_path: Path, body: str) -> str:
    """Runs ``body`` (inside ``async def main()``) under the guard; returns its findings."""
    log = tmp_path / "stalls.log"
    log.write_text("")
    # concurrent.futures.thread: what asyncio.to_thread imports on first use (the server imports
    # it up front; a first import on the loop is a finding of its own)
    code = (
        "import asyncio, concurrent.futures.thread, os, subprocess, time\n\n\nasync def main():\n"
    )
    code += textwrap.indent(textwrap.dedent(body), "    ") + "\n\nasyncio.run(main())\n"
    done = subprocess.run(
        [*GUARD, code], capture_output=True, text=True, timeout=60,
        env={**os.environ, "TRNLENS_LOOP_GUARD": str(log), "TRNLENS_LOOP_GUARD_CPU_S": "0.2"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return log.read_text()


@pytest.mark.parametrize(
    "body, what",
    [
        ('subprocess.run(["git", "--version"], capture_output=True)', "Popen.communicate"),
        ('subprocess.Popen(["true"]).wait()', "Popen.wait"),
        ("time.sleep(0.01)", "time.sleep"),
        ("fd = os.open('.', os.O_RDONLY)\nos.fsync(fd)\nos.close(fd)", "os.fsync"),
    ],
    ids=["subprocess.run", "Popen.wait", "time.sleep", "os.fsync"],
)
def test_a_blocking_call_on_the_loop_is_reported(tmp_path, body, what):
    found = guarded(tmp_path, body)
    assert f"blocking call on the event loop: {what}" in found, found


def test_a_cpu_stall_is_reported(tmp_path):
    found = guarded(
        tmp_path,
        """
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def spin():
            end = time.thread_time() + 0.4
            while time.thread_time() < end:
                pass
            done.set_result(None)

        loop.call_soon(spin)
        await done
        """,
    )
    assert "held the event loop for" in found and "of CPU" in found, found
    assert ", in spin\n" in found.split("where its time went")[1], found  # the sampled stack


def test_the_same_work_in_a_thread_or_awaited_is_not_reported(tmp_path):
    found = guarded(
        tmp_path,
        """
        await asyncio.to_thread(subprocess.run, ["git", "--version"], capture_output=True)
        await asyncio.to_thread(time.sleep, 0.01)
        await asyncio.sleep(0.3)  # waiting is not CPU
        proc = await asyncio.create_subprocess_exec("true")
        await proc.wait()
        """,
    )
    assert found == ""


def test_a_first_import_on_the_loop_is_reported_and_one_in_a_thread_is_not(tmp_path):
    found = guarded(
        tmp_path,
        """
        await asyncio.to_thread(__import__, "xml.dom.minidom")  # a worker thread: not reported
        import wave  # on the loop: the first time, from disk
        import wave  # noqa: F811 (the second is a dict lookup: not reported)
        """,
    )
    assert found.count("blocking call on the event loop: a first import of wave") == 1, found
    assert "xml" not in found, found
