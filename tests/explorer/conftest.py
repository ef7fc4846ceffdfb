"""A Trainium "host" with its own network namespace: sshd and the stand-in neuron-explorer.

The namespace gets one end of a veth pair (10.231.N.2/30; this machine keeps 10.231.N.1), its
own loopback, an sshd listening on 10.231.N.2:22, and whatever the tests start there over ssh.
Its ports 3001/3002 are not this machine's, so only a tunnel reaches them. Everything is removed
after: every process in the namespace, the veth pair, the namespace.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.components import needs
from tests.targets import sshd

STANDIN = Path(__file__).parent / "standin"

needs_netns = needs(
    None
    if os.path.exists(sshd.SSHD)
    and shutil.which("ssh")
    and shutil.which("ip")
    and os.geteuid() == 0
    else "needs root, iproute2 and openssh-server (scripts/setup.sh installs them)"
)


@dataclass
class NsHost:
    namespace: str
    address: str
    alias: str
    directory: Path
    config: Path

    def client_config(self, name: str, **overrides: str) -> Path:
        options = {
            "HostName": self.address, "Port": "22",
            "IdentityFile": str(self.directory / "client_key"), "IdentitiesOnly": "yes",
            "UserKnownHostsFile": str(self.directory / "known_hosts"),
            "StrictHostKeyChecking": "yes", "BatchMode": "yes", "User": "root",
        }  # fmt: skip
        options.update(overrides)
        path = self.directory / name
        path.write_text(
            f"Host {self.alias}\n" + "".join(f"    {k} {v}\n" for k, v in options.items())
        )
        return path


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _free_pair() -> tuple[int, int]:
    """Two ports free here (so the tunnel can bind the host's numbers locally)."""
    ports = []
    while len(ports) < 2:
        port = sshd.free_port()
        if port not in ports:
            ports.append(port)
    return ports[0], ports[1]


@pytest.fixture(scope="session")
def ns_host(tmp_path_factory):
    tag = os.getpid() % 250 + 1
    namespace, veth = f"trnlens-explorer-{os.getpid()}", f"trnx{os.getpid()}"[:15]
    here, there = f"10.231.{tag}.1", f"10.231.{tag}.2"
    directory = tmp_path_factory.mktemp("nshost")
    _ip("netns", "add", namespace)
    try:
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth-host", "netns", namespace)
        _ip("addr", "add", f"{here}/30", "dev", veth)
        _ip("link", "set", veth, "up")
        inside = ["ip", "netns", "exec", namespace]
        for cmd in (["ip", "link", "set", "lo", "up"],
                    ["ip", "addr", "add", f"{there}/30", "dev", "eth-host"],
                    ["ip", "link", "set", "eth-host", "up"]):  # fmt: skip
            subprocess.run([*inside, *cmd], check=True, capture_output=True)
        sshd.keygen(directory / "host_key")
        sshd.keygen(directory / "client_key")
        shutil.copy(directory / "client_key.pub", directory / "authorized_keys")
        config = sshd.write_config(directory, 22, there, "AllowTcpForwarding yes\n")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        subprocess.run([*inside, sshd.SSHD, "-f", str(config), "-E", str(directory / "sshd.log")],
                       check=True)  # fmt: skip
        key = (directory / "host_key.pub").read_text().split()
        (directory / "known_hosts").write_text(f"{there} {key[0]} {key[1]}\n")
        host = NsHost(namespace, there, "trn-ns-host", directory, directory / "ssh_config")
        host.client_config("ssh_config")
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as s:
                s.settimeout(1)
                if s.connect_ex((there, 22)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("sshd did not start: " + (directory / "sshd.log").read_text())
            time.sleep(0.05)
        yield host
    finally:
        pids = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True)
        for pid in pids.stdout.split():
            try:
                os.kill(int(pid), 9)
            except (OSError, ValueError):
                pass
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


@pytest.fixture
def host_ports():
    return _free_pair()


@pytest.fixture
def explorer_env(tmp_path, host_ports):
    """The target's env on the host: the stand-in on PATH, its ports and its state file."""
    return {
        "PATH": f"{STANDIN}:/usr/local/bin:/usr/bin:/bin",
        "NEURON_EXPLORER_STANDIN_PORTS": f"{host_ports[0]},{host_ports[1]}",
        "NEURON_EXPLORER_STANDIN_STATE": str(tmp_path / "ingested.json"),
    }
