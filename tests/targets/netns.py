"""Hosts for multi-host tests: network namespaces on one bridge, each with its own address.

Each namespace is a host as the network sees it: its own loopback and interface, its own ports,
reachable from the others and from this (the root) namespace through the bridge. A test sshd
started inside one (sshd.start(netns=...)) makes it an SSH host whose processes all live there.
Needs root and iproute2 (``ip``); everything made here is removed by ``remove()``.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import dataclass, field


@dataclass
class Namespace:
    name: str
    address: str
    interface: str  # the namespace's side of its veth pair (GLOO_SOCKET_IFNAME there)


@dataclass
class Network:
    bridge: str
    subnet: str
    namespaces: list[Namespace] = field(default_factory=list)

    def remove(self) -> None:
        # A namespace's veth end goes with it, and takes its bridge-side peer along.
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns.name], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)


def _ip(*args: str, netns: str | None = None) -> None:
    inside = ["ip", "netns", "exec", netns] if netns else []
    done = subprocess.run([*inside, "ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def make(count: int) -> Network:
    """``count`` namespaces on a bridge of their own (names unique to this call; interface
    names stay within Linux's 15 characters)."""
    tag = uuid.uuid4().hex[:6]
    # a /24 of 10.213.x.0 that no other test session's network has (by pid, then retried)
    third = os.getpid() % 250
    network = Network(bridge=f"tlb{tag}", subnet=f"10.213.{third}")
    try:
        _ip("link", "add", network.bridge, "type", "bridge")
        _ip("addr", "add", f"{network.subnet}.254/24", "dev", network.bridge)
        _ip("link", "set", network.bridge, "up")
        for index in range(count):
            ns = Namespace(f"tln{index}{tag}", f"{network.subnet}.{index + 1}", f"tlv{index}{tag}")
            outside = f"tlh{index}{tag}"
            _ip("netns", "add", ns.name)
            network.namespaces.append(ns)
            _ip("link", "add", outside, "type", "veth", "peer", "name", ns.interface)
            _ip("link", "set", ns.interface, "netns", ns.name)
            _ip("link", "set", outside, "master", network.bridge)
            _ip("link", "set", outside, "up")
            _ip("addr", "add", f"{ns.address}/24", "dev", ns.interface, netns=ns.name)
            _ip("link", "set", ns.interface, "up", netns=ns.name)
            _ip("link", "set", "lo", "up", netns=ns.name)
    except BaseException:
        network.remove()
        raise
    return network
