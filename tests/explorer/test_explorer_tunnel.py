"""Neuron Explorer through a real SSH tunnel to a host in its own network namespace, where a
stand-in neuron-explorer (tests/explorer/standin/) serves a UI port and an API port."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from trnlens.explorer import launch
from trnlens.explorer.tunnel import ExplorerError, Pool, Ports, Tunnel, answers
from trnlens.targets.local import LocalTarget
from trnlens.targets.ssh import SshTarget

from tests.explorer.conftest import needs_netns

pytestmark = needs_netns
H = "395760075800974"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yield
    from trnlens.targets.ssh import close_masters

    close_masters()  # this test's ssh masters only (the cache is this test's)


def _run_dir(root: Path) -> Path:
    profile = root / "run1" / "neuron" / "i-0abc_pid_7" / "20260101T000000"
    profile.mkdir(parents=True)
    for name, size in ((f"neff_{H}_vnc_0.neff", 100), ("profile_nc_0_session_0.ntff", 200),
                       ("trace_info.pb", 10), ("ntrace.pb", 10)):  # fmt: skip
        (profile / name).write_bytes(b"x" * size)
    return root / "run1"


RUN = {"run_id": "run1", "function": {"qualname": "rmsnorm"}}


def _target(host, env, tmp_path, config=None) -> SshTarget:
    return SshTarget(name="trn", host=host.alias, ssh_args=["-F", str(config or host.config)],
                     env=env, workdir=str(tmp_path / "hostwork"), connect_timeout_s=5)  # fmt: skip


def _kill_standin(workdir: Path) -> None:
    try:
        os.kill(int((workdir / "explorer.pid").read_text()), signal.SIGTERM)
    except (OSError, ValueError):
        pass


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def _api_of_page(url: str) -> str:
    return re.search(r'data-api="([^"]+)"', _get(url)).group(1)


def _listeners(port: int) -> list[str]:
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            local = cols[1]
            if cols[3] == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                found.append(local.rsplit(":", 1)[0])
    return found


def test_both_ports_through_the_tunnel_reused_restarted_reopened_closed(
    ns_host, explorer_env, host_ports, tmp_path
):
    target = _target(ns_host, explorer_env, tmp_path)
    ports = Ports(*host_ports)
    pool = Pool()
    try:
        assert not answers(f"http://localhost:{ports.ui}/", 1)  # the host's port is not ours
        opened = asyncio.run(launch.open_explorer(target, RUN, _run_dir(tmp_path), pool, ports))
        assert opened.url == f"http://localhost:{ports.ui}/" and opened.started
        assert opened.display_names == ["rmsnorm run1"] and not opened.tunnel_reused
        api = _api_of_page(opened.url)  # what the UI page calls, on the port it expects
        assert api == f"http://localhost:{ports.api}/api/profiles"
        ingested = json.loads(_get(api))
        assert ingested[0]["name"] == "rmsnorm run1"
        assert {"trace_info.pb", "ntrace.pb"} <= set(ingested[0]["files"])
        assert ingested[0]["dir"].startswith(str(tmp_path / "hostwork" / "explorer" / "profiles"))
        for port in (ports.ui, ports.api):  # nothing but 127.0.0.1
            assert _listeners(port) == ["0100007F"]
        again = asyncio.run(launch.open_explorer(target, None, None, pool, ports))
        assert again.tunnel_reused and not again.started and "profile list" in again.message
        # the stand-in restarts: started again, the same tunnel carries on
        _kill_standin(tmp_path / "hostwork" / "explorer")
        restarted = asyncio.run(launch.open_explorer(target, None, None, pool, ports))
        assert restarted.started and restarted.tunnel_reused and answers(restarted.api_url)
        # a dead tunnel is reopened
        (tunnel,) = pool.tunnels.values()
        tunnel.process.kill()
        tunnel.process.wait()
        assert not answers(opened.url, 1)
        reopened = asyncio.run(launch.open_explorer(target, None, None, pool, ports))
        assert not reopened.tunnel_reused and json.loads(_get(_api_of_page(reopened.url)))
    finally:
        pool.close_all()
        _kill_standin(tmp_path / "hostwork" / "explorer")
    assert not answers(f"http://localhost:{ports.ui}/", 1)  # closed


def test_the_ui_port_alone_is_not_enough(ns_host, explorer_env, host_ports, tmp_path):
    target = _target(ns_host, explorer_env, tmp_path)
    ports = Ports(*host_ports)
    host = launch.Host(target, str(tmp_path / "hostwork" / "explorer"))
    ui_only = None
    try:
        binary = asyncio.run(launch.find_binary(host))
        asyncio.run(launch.ensure_running(host, binary, ports))
        command = Tunnel(target, ports).command()
        at = command.index(f"127.0.0.1:{ports.api}:localhost:{ports.api}")
        del command[at - 1 : at + 1]  # forward the UI port only
        ui_only = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if answers(f"http://localhost:{ports.ui}/", 1):
                break
            asyncio.run(asyncio.sleep(0.1))
        api = _api_of_page(f"http://localhost:{ports.ui}/")  # the page loads ...
        assert not answers(api, 1)  # ... and its API call fails
    finally:
        if ui_only:
            ui_only.terminate()
            ui_only.wait()
        _kill_standin(tmp_path / "hostwork" / "explorer")


def test_a_taken_local_port_names_its_owner(ns_host, explorer_env, host_ports, tmp_path):
    target = _target(ns_host, explorer_env, tmp_path)
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", host_ports[1]))
    squatter.listen()
    try:
        with pytest.raises(ExplorerError) as caught:
            asyncio.run(launch.open_explorer(target, None, None, Pool(), Ports(*host_ports)))
        message = str(caught.value)
        assert f"local port {host_ports[1]} (Explorer API) is taken" in message
        assert f"pid {os.getpid()} (" in message  # this test process holds it
    finally:
        squatter.close()
        _kill_standin(tmp_path / "hostwork" / "explorer")


def test_without_neuron_explorer_the_install_message_and_the_pair(ns_host, tmp_path):
    if os.path.exists(launch.DEFAULT_BINARY):
        pytest.skip("a real neuron-explorer is installed here")
    target = _target(ns_host, {"PATH": "/usr/bin:/bin"}, tmp_path)
    run_dir = _run_dir(tmp_path)
    with pytest.raises(launch.ExplorerMissing) as caught:
        asyncio.run(launch.open_explorer(target, RUN, run_dir, Pool()))
    message = str(caught.value)
    assert f"neuron-explorer is not installed on {ns_host.alias}" in message
    assert "aws-neuronx-tools" in message and f"neff_{H}_vnc_0.neff" in message
    assert [p.name for p in caught.value.downloads] == [
        f"neff_{H}_vnc_0.neff", "profile_nc_0_session_0.ntff"]  # fmt: skip


def test_ssh_refusing_and_a_remote_port_not_answering(ns_host, explorer_env, host_ports, tmp_path):
    from tests.targets import sshd

    sshd.keygen(tmp_path / "stranger")
    refused = ns_host.client_config("refused", IdentityFile=str(tmp_path / "stranger"))
    target = _target(ns_host, explorer_env, tmp_path, refused)
    with pytest.raises(ExplorerError, match="refused authentication"):
        asyncio.run(launch.open_explorer(target, None, None, Pool(), Ports(*host_ports)))
    silent = Tunnel(_target(ns_host, explorer_env, tmp_path), Ports(*host_ports))
    try:
        with pytest.raises(ExplorerError, match="did not answer within 2 s"):
            asyncio.run(silent.open(timeout=2))
    finally:
        silent.close()


def test_local_target_needs_no_tunnel(explorer_env, host_ports, tmp_path):
    target = LocalTarget(env=explorer_env)
    workdir = tmp_path / "localwork"
    try:
        opened = asyncio.run(
            launch.open_explorer(
                target, RUN, _run_dir(tmp_path), None, Ports(*host_ports), local_workdir=workdir
            )  # fmt: skip
        )
        assert opened.started and "tunnel" not in opened.message
        assert json.loads(_get(_api_of_page(opened.url)))[0]["dir"].startswith(str(tmp_path))
    finally:
        _kill_standin(workdir)


def test_cli_prints_the_url_first_and_holds_the_tunnel(ns_host, explorer_env, host_ports, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    env_toml = ", ".join(f"{k} = {json.dumps(v)}" for k, v in explorer_env.items())
    (project / "pyproject.toml").write_text(
        f'[tool.trnlens.targets.trn]\nhost = "{ns_host.alias}"\n'
        f'ssh_args = ["-F", "{ns_host.config}"]\nworkdir = "{tmp_path / "hostwork"}"\n'
        f"env = {{ {env_toml} }}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "trnlens", "explorer", "--target", "trn", "--project",
         str(project), "--ui-port", str(host_ports[0]), "--api-port", str(host_ports[1])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )  # fmt: skip
    try:
        first = proc.stdout.readline().strip()
        assert first == f"http://localhost:{host_ports[0]}/", proc.stderr.read()
        assert answers(first) and answers(f"http://localhost:{host_ports[1]}/")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0
        assert not answers(first, 1)  # the tunnel went with it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_standin(tmp_path / "hostwork" / "explorer")
