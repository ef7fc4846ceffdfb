"""`trnlens.server.openExplorer` from a real LSP client: URL, showDocument, closed on exit."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from trnlens.explorer.tunnel import answers
from trnlens.targets import bundle

from tests.explorer.conftest import needs_netns
from tests.lsp.session import FAST, editor, workspace

pytestmark = needs_netns


async def test_open_explorer_command_through_the_tunnel(
    ns_host, explorer_env, host_ports, tmp_path
):
    root = workspace(tmp_path)
    remote = {"host": ns_host.alias, "ssh_args": ["-F", str(ns_host.config)],
              "workdir": str(tmp_path / "hostwork"), "env": explorer_env}  # fmt: skip
    options = {**FAST, "targets": {"trn": remote}, "target": "trn"}
    try:
        async with editor(root, options) as ed:
            shown = ed.client.shown_documents  # pytest-lsp answers showDocument and keeps it
            ports = {"uiPort": host_ports[0], "apiPort": host_ports[1]}
            answer = await ed.command("trnlens.server.openExplorer", ports)
            assert answer["url"] == f"http://localhost:{host_ports[0]}/"
            assert answer["apiUrl"] == f"http://localhost:{host_ports[1]}/"
            assert answers(answer["url"]) and answers(answer["apiUrl"])
            again = await ed.command("trnlens.server.openExplorer", ports)
            assert again["tunnelReused"]
            await ed.wait_for(lambda: shown, what="showDocument")
            assert shown[0].uri == answer["url"] and shown[0].external
        assert not answers(answer["url"], 1)  # closed with the server
        # and so is the shared connection the explorer's host commands opened (ControlPersist
        # would otherwise keep an `ssh: ... [mux]` alive for ten minutes: issue 24)
        assert _masters_gone(bundle.cache_dir() / "ssh", deadline_s=10), _mux_processes()
    finally:
        try:
            pid = (tmp_path / "hostwork" / "explorer" / "explorer.pid").read_text()
            os.kill(int(pid), signal.SIGTERM)
        except (OSError, ValueError):
            pass


def _mux_processes() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "[mux]" in command and str(bundle.cache_dir()) in command:
            found.append(command.strip())
    return found


def _masters_gone(directory: Path, deadline_s: float) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if not _mux_processes() and not (directory.is_dir() and any(directory.iterdir())):
            return True
        time.sleep(0.05)
    return False
