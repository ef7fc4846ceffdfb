"""An SSH tunnel forwarding Neuron Explorer's UI and API ports, bound to 127.0.0.1 only.

The UI (3001) calls its API (3002) on the port it expects, so both are forwarded and the local
port numbers are the host's: a local port already taken is reported with the process holding it
(read from /proc/net/tcp* and /proc/*/fd) instead of being moved. The tunnel is its own
``ssh -N`` process (no ControlMaster: closing it closes the forwards), with
``ExitOnForwardFailure`` so a forward that cannot be set up ends it with ssh's reason. Tunnels are
kept in a :class:`Pool`: reused while alive, reopened when dead, closed at exit.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from trnlens.targets.ssh import SshTarget

UI_PORT, API_PORT = 3001, 3002


class ExplorerError(Exception):
    """An explorer problem with a message fit for the user."""


@dataclass(frozen=True)
class Ports:
    ui: int = UI_PORT
    api: int = API_PORT

    def __post_init__(self) -> None:
        for port in (self.ui, self.api):
            if not isinstance(port, int) or not 0 < port < 65536:
                raise ExplorerError(f"{port!r} is not a TCP port")
        if self.ui == self.api:
            raise ExplorerError("the UI and API ports must differ")


# -- who holds a local port


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 10:
                continue
            local, state, inode = cols[1], cols[3], cols[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(inode)
    return inodes


def port_owner(port: int) -> str | None:
    """``"pid 123 (python3 -m http.server)"`` for the process listening on ``port``, if known."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in wanted:
                    raw = (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip()
                    command = raw.decode("utf-8", "replace")[:120] or "?"
                    return f"pid {entry.name} ({command})"
        except OSError:
            continue
    return "a process this user cannot see (try `ss -ltnp`)"


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as ssh does: TIME_WAIT is free
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return not _listening_inodes(port)  # also taken when another address holds it


def taken_message(port: int, role: str) -> str:
    owner = port_owner(port)
    holder = f"{owner} holds it" if owner else "something holds it"
    return (
        f"local port {port} (Explorer {role}) is taken: {holder}. The UI calls its API on the "
        "port it expects, so trnlens forwards the same numbers: stop that process, or configure "
        "other explorer ports (both ends)"
    )


# -- HTTP checks


def answers(url: str, timeout: float = 3) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read(1)
            return True
    except urllib.error.HTTPError:
        return True  # it answered, even if not 200
    except (OSError, ValueError):
        return False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class Tunnel:
    target: SshTarget
    ports: Ports = field(default_factory=Ports)
    remote_host: str = "localhost"
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://localhost:{self.ports.ui}/"

    @property
    def api_url(self) -> str:
        return f"http://localhost:{self.ports.api}/"

    def command(self) -> list[str]:
        forwards = []
        for port in (self.ports.ui, self.ports.api):
            forwards += ["-L", f"127.0.0.1:{port}:{self.remote_host}:{port}"]
        return [
            "ssh",
            *self.target.ssh_args,
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={self.target.connect_timeout_s}",
            "-o", "ControlMaster=no",
            "-o", "ControlPath=none",
            "-o", "ExitOnForwardFailure=yes",
            "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=3",
            "-o", "GatewayPorts=no",
            "-N", *forwards,
            self.target.host,
        ]  # fmt: skip

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def open(self, timeout: float = 30) -> None:
        """Starts ssh and waits until both ports answer through it (raises ExplorerError)."""
        if self.alive():
            return
        for port, role in ((self.ports.ui, "UI"), (self.ports.api, "API")):
            if not port_free(port):
                raise ExplorerError(taken_message(port, role))
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.communicate()[1].decode("utf-8", "replace")
                self.process = None
                raise ExplorerError(self._why(err))
            if all(await asyncio.gather(*(asyncio.to_thread(answers, u, 2) for u in self._urls()))):
                return
            await asyncio.sleep(0.2)
        missing = [u for u in self._urls() if not await asyncio.to_thread(answers, u, 2)]
        self.close()
        raise ExplorerError(
            f"the tunnel to {self.target.host} is up but {', '.join(missing)} did not answer "
            f"within {timeout:.0f} s: is neuron-explorer serving ports {self.ports.ui} and "
            f"{self.ports.api} on the host?"
        )

    def _urls(self) -> list[str]:
        return [self.url, self.api_url]

    def _why(self, stderr: str) -> str:
        if "forwarding" in stderr.lower() or "Address already in use" in stderr:
            taken = [p for p in (self.ports.ui, self.ports.api) if not port_free(p)]
            if taken:
                return taken_message(taken[0], "UI" if taken[0] == self.ports.ui else "API")
        return self.target.explain(255, stderr, "the tunnel")

    def close(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None and process.stderr:
            process.stderr.close()


class Pool:
    """Tunnels by (host, ssh args, ports): reused while alive, reopened when dead."""

    def __init__(self) -> None:
        self.tunnels: dict[tuple, Tunnel] = {}
        atexit.register(self.close_all)

    async def get(self, target: SshTarget, ports: Ports) -> tuple[Tunnel, bool]:
        """The open tunnel and whether it was reused."""
        key = (target.host, tuple(target.ssh_args), ports)
        tunnel = self.tunnels.get(key)
        if tunnel is not None and tunnel.alive():
            healthy = await asyncio.to_thread(answers, tunnel.url, 2)
            if healthy and await asyncio.to_thread(answers, tunnel.api_url, 2):
                return tunnel, True
        if tunnel is not None:
            tunnel.close()
        # another key forwarding the same local ports would block this one: close it first
        for other_key, other in list(self.tunnels.items()):
            if other_key != key and {other.ports.ui, other.ports.api} & {ports.ui, ports.api}:
                other.close()
                del self.tunnels[other_key]
        tunnel = Tunnel(target, ports)
        self.tunnels[key] = tunnel
        await tunnel.open()
        return tunnel, False

    def close_all(self) -> None:
        for tunnel in self.tunnels.values():
            tunnel.close()
        self.tunnels.clear()
