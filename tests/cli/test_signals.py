"""SIGTERM and SIGHUP to `trnlens profile` (timeout, a CI cancel, a closed terminal) stop the
agent too: user code stuck in a loop is not left running on its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

SPIN = """\
import subprocess
import sys

import torch


def spin(x=torch.ones(4)):
    # a child of the user's code, in the agent's process group, outliving nobody
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open(MARKER, "w").close()
    while True:
        pass
"""


def _group(pgid: int) -> list[str]:
    found = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True)
    return found.stdout.split()


def _wait_until_empty(pgid: int, deadline_s: float = 30.0) -> list[str]:
    """The group's members once none is left, or those still there at the deadline (SIGKILLed
    members are reaped by init a moment after the CLI has exited)."""
    deadline = time.monotonic() + deadline_s
    while (left := _group(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_signal_to_the_cli_leaves_no_process(tmp_path, signum):
    marker = tmp_path / "spinning"
    (tmp_path / "spin.py").write_text(SPIN + f"\n\nMARKER = {str(marker)!r}\n")
    cli = subprocess.Popen(
        [sys.executable, "-m", "trnlens", "profile", "spin.py::spin", "--warmup", "1"],
        cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    groups: set[int] = set()
    try:
        deadline = time.monotonic() + 120  # starting the agent imports torch
        while not marker.exists() and cli.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the user's code should be running"
        agents = subprocess.run(["pgrep", "-P", str(cli.pid)], capture_output=True, text=True)
        pids = [int(pid) for pid in agents.stdout.split()]
        assert pids, "the agent should be running as the CLI's child"
        groups = {os.getpgid(pid) for pid in pids}
        assert cli.pid not in groups  # the agent's own group: the signal does not reach it
        cli.send_signal(signum)
        _, err = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 128 + signum, err
    assert f"stopped by {signal.Signals(signum).name}" in err
    left = {pgid: _wait_until_empty(pgid) for pgid in groups}
    for pgid, pids in left.items():
        if pids:  # a failing run leaves nothing behind either
            os.killpg(pgid, signal.SIGKILL)
    assert not any(left.values()), f"left behind in the agent's process group: {left}"
