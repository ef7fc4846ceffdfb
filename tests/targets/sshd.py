"""A real OpenSSH server for tests, on 127.0.0.1 and a free port, with keys made for the session.

Its "remote" python is a separate environment with torch and without trnlens, as a Trainium host
would be before trnlens ever touched it. The client side is an ssh config file with the host's
alias, its key pinned in a known_hosts file and StrictHostKeyChecking on.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class TestHost:
    alias: str
    port: int
    directory: Path
    config: Path  # the client's ssh config (-F)
    host_key: Path
    pidfile: Path
    address: str = "127.0.0.1"

    def ssh_args(self, config: Path | None = None) -> list[str]:
        return ["-F", str(config or self.config)]

    def client_config(self, name: str, **overrides: str) -> Path:
        """Another client config for the same host, some options changed (for failure cases)."""
        options = {
            "HostName": self.address, "Port": str(self.port),
            "IdentityFile": str(self.directory / "client_key"), "IdentitiesOnly": "yes",
            "UserKnownHostsFile": str(self.directory / "known_hosts"),
            "StrictHostKeyChecking": "yes", "BatchMode": "yes", "User": "root",
        }  # fmt: skip
        options.update(overrides)
        path = self.directory / name
        body = "".join(f"    {k} {v}\n" for k, v in options.items())
        path.write_text(f"Host {self.alias}\n{body}")
        return path

    def stop(self) -> None:
        try:
            os.kill(int(self.pidfile.read_text()), 15)
        except (OSError, ValueError):
            pass

    def reboot(self) -> None:
        """As if the host rebooted: every session cut, sshd gone, then back on the same port."""
        listener = int(self.pidfile.read_text())
        sessions = subprocess.run(["pgrep", "-P", str(listener)], capture_output=True, text=True)
        for pid in [listener, *map(int, sessions.stdout.split())]:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        config = self.directory / "sshd_config"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the port comes free once the listener is gone
            done = subprocess.run([SSHD, "-f", str(config), "-E", str(self.directory / "sshd.log")])
            if done.returncode == 0:
                break
            time.sleep(0.2)
        _wait_for_port(self.port, self.directory, self.address)


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def write_config(directory: Path, port: int, address: str, extra: str = "") -> Path:
    """The server's config: keys and pid file in ``directory``, ``extra`` lines at the end."""
    # The host's own temporary directory: sshd gives its sessions a clean environment (as a real
    # host does), so what they start would write into this machine's /tmp (torch creates its
    # torchinductor_<user> cache there) and outlive the test session.
    temp = directory / "tmp"
    temp.mkdir(exist_ok=True)
    config = directory / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress {address}\nHostKey {directory / 'host_key'}\n"
        f"AuthorizedKeysFile {directory / 'authorized_keys'}\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nStrictModes no\n"
        f"UsePAM no\nPidFile {directory / 'sshd.pid'}\nMaxSessions 50\nMaxStartups 50\n"
        f"SetEnv TMPDIR={temp}\n{extra}"
    )
    return config


def start(
    directory: Path,
    alias: str = "trn-test-host",
    extra: str = "",
    address: str = "127.0.0.1",
    netns: str | None = None,
) -> TestHost:
    """Starts sshd; ``extra`` lines go at the end of its config (a ForceCommand, say). In a
    network namespace (``netns``, tests/targets/netns.py) it listens on that namespace's
    ``address``, and what it starts (the agent, torchrun, the ranks) lives there too."""
    directory.mkdir(parents=True, exist_ok=True)
    keygen(directory / "host_key")
    keygen(directory / "client_key")
    shutil.copy(directory / "client_key.pub", directory / "authorized_keys")
    port = free_port()
    config = write_config(directory, port, address, extra)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    inside = ["ip", "netns", "exec", netns] if netns else []
    subprocess.run(
        [*inside, SSHD, "-f", str(config), "-E", str(directory / "sshd.log")], check=True
    )
    host_pub = (directory / "host_key.pub").read_text().split()
    (directory / "known_hosts").write_text(f"[{address}]:{port} {host_pub[0]} {host_pub[1]}\n")
    host = TestHost(alias, port, directory, directory / "ssh_config", directory / "host_key",
                    directory / "sshd.pid", address)  # fmt: skip
    host.client_config("ssh_config")
    _wait_for_port(port, directory, address)
    return host


def _wait_for_port(port: int, directory: Path, address: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex((address, port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("sshd did not start: " + (directory / "sshd.log").read_text())
