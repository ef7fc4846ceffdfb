"""What a test session left behind: files in its private temporary directory, live processes.

A process belongs to the session when it inherited the session's marker variable (everything the
tests start, directly or not) or names the session's directory on its command line (what sshd
starts for the tests: sshd gives its sessions a clean environment, but their paths are ours).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

# What the session itself keeps there, and removes with the directory: pytest's tmp_path roots
# and torch.compile's caches (TORCHINDUCTOR_CACHE_DIR, set by conftest, and the
# torchinductor_<user> some torch caches use whatever that says): torch's, not trnlens's;
# hypothesis's caches (set_hypothesis_home_dir in conftest).
# trnlens's cache (XDG_CACHE_HOME, set by conftest) is kept too, but a socket left in it is a
# leftover: a warm daemon or an ssh master nobody closed.
CACHE = "cache"
OURS = ("pytest-of-", "torchinductor", "hypothesis", CACHE)
SETTLE_S = 10.0  # processes told to stop at teardown may need a moment to go


@dataclass
class Leftovers:
    files: list[str] = field(default_factory=list)
    processes: dict[int, str] = field(default_factory=dict)  # pid -> command line

    def __bool__(self) -> bool:
        return bool(self.files or self.processes)

    def describe(self) -> str:
        lines = [f"left in the temporary directory: {name}" for name in self.files]
        lines += [f"still running: pid {pid}: {cmd}" for pid, cmd in self.processes.items()]
        return "\n".join(lines)


def _ancestors() -> set[int]:
    found, pid = set(), os.getpid()
    while pid > 1:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def session_processes(directory: Path, mark: str) -> dict[int, str]:
    """Live (not zombie) processes started by this session, except pytest and its parents."""
    needle_env = f"{mark}={directory}".encode()
    needle_cmd = str(directory).encode()
    mine = _ancestors()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if state == "Z" or not cmdline:
            continue
        if needle_env in environ.split(b"\0") or needle_cmd in cmdline:
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode("utf-8", "replace")
    return found


def leftovers(directory: Path, mark: str) -> Leftovers:
    deadline = time.monotonic() + SETTLE_S
    processes = session_processes(directory, mark)
    while processes and time.monotonic() < deadline:
        time.sleep(0.2)
        processes = session_processes(directory, mark)
    files = sorted(p.name for p in directory.iterdir() if not p.name.startswith(OURS))
    files += sorted(
        str(p.relative_to(directory)) for p in (directory / CACHE).rglob("*") if p.is_socket()
    )
    return Leftovers(files, processes)


def kill_processes(processes: dict[int, str]) -> None:
    """Stops what the failed check found, so that one leaky run does not slow the next."""
    for pid in processes:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
