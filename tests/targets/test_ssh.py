"""Profiling on a remote host over a real OpenSSH server (tests/targets/sshd.py)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from trnlens.jobs import AgentFailure, ProfileRequest, run_profile
from trnlens.store import Store
from trnlens.targets.ssh import SshTarget

from tests.targets.conftest import needs_sshd

pytestmark = needs_sshd
REPO = Path(__file__).resolve().parents[2]
FAST = {"warmup": 1, "steps": 2, "repeats": 3}

SLOW = """
import time
import torch


def slow(x=torch.ones(8)):
    time.sleep(0.5)
    return x + 1


def fails(x=torch.ones(4, 8)):
    y = x * 2
    return y.view(3, 7)
"""


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    shutil.copytree(REPO / "samples", root / "samples")
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / "slow.py").write_text(textwrap.dedent(SLOW))
    return root


def target(test_host, remote_python, tmp_path, **overrides) -> SshTarget:
    fields = {
        "name": "trn2-dev", "host": test_host.alias, "ssh_args": test_host.ssh_args(),
        "python": str(remote_python), "workdir": str(tmp_path / "remote work"), "backend": "cpu",
    }  # fmt: skip
    fields.update(overrides)
    return SshTarget(**fields)


def profile(root: Path, tgt: SshTarget, qualname="samples/rmsnorm.py::rmsnorm_naive", **kw):
    path, name = qualname.split("::")
    request = ProfileRequest(
        variants=[{"path": str(root / path), "qualname": name}], project_root=root,
        backend="cpu", **{**FAST, **kw},
    )  # fmt: skip
    phases = []
    with Store(root) as store:
        outcome = asyncio.run(run_profile(request, store, tgt, on_progress=phases.append))
    return outcome.data, phases


def remote_runs(tmp_path) -> list[Path]:
    runs = tmp_path / "remote work" / "runs"
    return list(runs.iterdir()) if runs.exists() else []


def test_remote_python_has_torch_but_not_trnlens(remote_python):
    probe = "import torch\ntry:\n import trnlens\nexcept ImportError:\n print('no trnlens')"
    done = subprocess.run([remote_python, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "no trnlens", done.stderr


def test_profile_end_to_end_over_ssh(test_host, remote_python, project, tmp_path, ssh_cache):
    tgt = target(test_host, remote_python, tmp_path)
    outcome, phases = profile(project, tgt)
    assert outcome["error"] is None
    assert outcome["dispatches_per_step"] == 6
    assert outcome["target"] == "trn2-dev"
    assert outcome["function"]["path"] == "samples/rmsnorm.py"
    assert [p.phase for p in phases][:1] == ["importing"]  # progress streamed back
    assert any(p.phase == "measuring" for p in phases)
    run_dir = project / ".trnlens" / "artifacts" / outcome["run_id"]
    assert (run_dir / "trace.json").stat().st_size > 0
    assert json.loads((run_dir / "result.json").read_text())["target"] == "trn2-dev"
    assert remote_runs(tmp_path) == []  # the remote run directory is gone
    lines = {(e["path"], e["line"]) for e in outcome["lines"]}
    assert lines == {("samples/rmsnorm.py", 17)}


def test_the_host_keeps_its_temporary_files_in_its_own_folder(test_host):
    # sshd starts its sessions with a clean environment: without the host's own TMPDIR, what the
    # remote agent's torch writes there (its torchinductor_<user> cache) lands in this machine's
    # /tmp and outlives the test session.
    done = subprocess.run(
        ["ssh", *test_host.ssh_args(), test_host.alias, 'echo "$TMPDIR"'],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.stdout.strip() == str(test_host.directory / "tmp"), done.stderr


def test_closing_the_masters_takes_their_sockets_and_folder(
    test_host, remote_python, project, tmp_path, ssh_cache
):
    from trnlens.targets.ssh import close_masters, control_dir

    outcome, _ = profile(project, target(test_host, remote_python, tmp_path))
    assert outcome["error"] is None
    directory = control_dir()
    assert [p for p in directory.iterdir() if p.is_socket()]  # ControlPersist kept the master
    assert close_masters() >= 1
    assert not directory.exists()  # not even empty: the masters' sockets went before the rmdir


def test_only_needed_files_travel(test_host, remote_python, tmp_path, ssh_cache):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "helpers.py").write_text("def double(t):\n    return t * 2\n")
    (root / "pkg" / "model.py").write_text(
        "import torch\nfrom .helpers import double\n\n\ndef f(x=torch.ones(4)):\n"
        "    return double(x) + 1\n"
    )
    (root / "unrelated.py").write_text("raise SystemExit('must not be imported or shipped')\n")
    (root / "pyproject.toml").write_text("")
    outcome, _ = profile(root, target(test_host, remote_python, tmp_path), "pkg/model.py::f")
    assert outcome["error"] is None, outcome["error"]
    assert {e["path"] for e in outcome["lines"]} == {"pkg/model.py", "pkg/helpers.py"}


def test_user_code_raising_remotely_maps_to_the_local_file(
    test_host, remote_python, project, tmp_path, ssh_cache
):
    outcome, _ = profile(project, target(test_host, remote_python, tmp_path), "slow.py::fails")
    error = outcome["error"]
    assert error["kind"] == "user_code"
    assert (error["path"], error["line"]) == ("slow.py", 13)
    assert str(project) in error["traceback"]
    assert "runs/" not in error["traceback"]


def test_unsaved_buffer_goes_to_the_host(test_host, remote_python, project, tmp_path, ssh_cache):
    buffer = (project / "samples" / "rmsnorm.py").read_text().replace(
        "return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight",
        "return torch.rms_norm(x, (x.shape[-1],), weight, eps)", 1,
    )  # fmt: skip
    path, name = project / "samples" / "rmsnorm.py", "rmsnorm_naive"
    request = ProfileRequest(
        variants=[{"path": str(path), "qualname": name}], project_root=project, backend="cpu",
        files={str(path): buffer}, **FAST,
    )  # fmt: skip
    with Store(project) as store:
        tgt = target(test_host, remote_python, tmp_path)
        outcome = asyncio.run(run_profile(request, store, tgt)).data
    assert outcome["function"]["unsaved"] is True
    assert outcome["dispatches_per_step"] == 1


def test_hostile_names_reach_the_host_unharmed(test_host, remote_python, tmp_path, ssh_cache):
    hostile = "we ird 'q' \"dq\" $(touch PWNED) ;& `id` *"
    root = tmp_path / hostile
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "m o'd$el.py").write_text(
        "import torch\n\n\ndef f(x=torch.ones(4)):\n    return x + 1\n"
    )
    tgt = target(test_host, remote_python, tmp_path, workdir=str(tmp_path / f"remote {hostile}"))
    outcome, _ = profile(root, tgt, "m o'd$el.py::f")
    assert outcome["error"] is None and outcome["dispatches_per_step"] == 1
    assert outcome["function"]["path"] == "m o'd$el.py"
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()
    assert not Path.home().joinpath("PWNED").exists()


def failure(root, tgt, **kw) -> dict:
    with pytest.raises(AgentFailure) as caught:
        profile(root, tgt, **kw)
    return caught.value.error


def test_unreachable_host(test_host, remote_python, project, tmp_path, ssh_cache):
    from tests.targets.sshd import free_port

    config = test_host.client_config("closed", Port=str(free_port()))
    error = failure(
        project, target(test_host, remote_python, tmp_path, ssh_args=["-F", str(config)])
    )
    assert error["kind"] == "environment"
    assert "cannot reach trn-test-host over ssh" in error["message"]
    assert "Connection refused" in error["message"]


def test_authentication_refused(test_host, remote_python, project, tmp_path, ssh_cache):
    from tests.targets.sshd import keygen

    keygen(tmp_path / "stranger")
    config = test_host.client_config("stranger", IdentityFile=str(tmp_path / "stranger"))
    error = failure(
        project, target(test_host, remote_python, tmp_path, ssh_args=["-F", str(config)])
    )
    assert "refused authentication" in error["message"]


def test_changed_host_key_is_refused_never_ignored(
    test_host, remote_python, project, tmp_path, ssh_cache
):
    from tests.targets.sshd import keygen

    keygen(tmp_path / "other_host_key")
    other = (tmp_path / "other_host_key.pub").read_text().split()
    known = tmp_path / "known_hosts_changed"
    known.write_text(f"[127.0.0.1]:{test_host.port} {other[0]} {other[1]}\n")
    config = test_host.client_config("changed", UserKnownHostsFile=str(known))
    error = failure(
        project, target(test_host, remote_python, tmp_path, ssh_args=["-F", str(config)])
    )
    assert "does not match your known_hosts" in error["message"]
    assert "never turns off host key checking" in error["message"]


def test_remote_python_missing(test_host, project, tmp_path, ssh_cache):
    error = failure(project, target(test_host, "/nowhere/python3", tmp_path))
    assert "'/nowhere/python3' was not found on trn-test-host" in error["message"]


def test_torch_missing_on_the_host(test_host, project, tmp_path, ssh_cache):
    from tests.conftest import python_without_trnlens

    bare = python_without_trnlens(tmp_path / "bare", with_torch=False)
    error = failure(project, target(test_host, bare, tmp_path))
    assert error["kind"] == "environment"
    assert "torch cannot be imported" in error["message"]


def _agent_pids(tmp_path) -> list[int]:
    agents = tmp_path / "remote work" / "agents"
    return [int(p.read_text()) for p in agents.glob("*.pid")] if agents.exists() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cancel_mid_run_leaves_no_remote_process(
    test_host, remote_python, project, tmp_path, ssh_cache
):
    tgt = target(test_host, remote_python, tmp_path)
    request = ProfileRequest(
        variants=[{"path": str(project / "slow.py"), "qualname": "slow"}], project_root=project,
        backend="cpu", warmup=1, steps=40, repeats=3,
    )  # fmt: skip
    seen_pids: list[int] = []

    async def scenario():
        with Store(project) as store:
            measuring = asyncio.Event()

            def progress(message):
                if message.phase == "measuring":
                    measuring.set()

            task = asyncio.create_task(run_profile(request, store, tgt, on_progress=progress))
            await asyncio.wait_for(measuring.wait(), 60)
            seen_pids.extend(_agent_pids(tmp_path))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(scenario())
    assert seen_pids, "the remote agent recorded its pid"
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in seen_pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in seen_pids)
    assert remote_runs(tmp_path) == []


def test_connection_dropped_mid_run(test_host, remote_python, project, tmp_path, ssh_cache):
    tgt = target(test_host, remote_python, tmp_path)
    request = ProfileRequest(
        variants=[{"path": str(project / "slow.py"), "qualname": "slow"}], project_root=project,
        backend="cpu", warmup=1, steps=40, repeats=3,
    )  # fmt: skip
    pids: list[int] = []

    async def scenario():
        with Store(project) as store:
            dropped = False

            def progress(message):
                nonlocal dropped
                if message.phase == "measuring" and not dropped:
                    dropped = True
                    pids.extend(_agent_pids(tmp_path))
                    # The host's side of the connection goes away: kill the sshd session
                    # processes serving this test host (not the listener).
                    for pid in _session_sshd_pids(test_host):
                        os.kill(pid, signal.SIGKILL)

            return await run_profile(request, store, tgt, on_progress=progress)

    with pytest.raises(AgentFailure) as caught:
        asyncio.run(scenario())
    assert "dropped during the run" in caught.value.error["message"]
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids and not any(_alive(p) for p in pids)  # it stopped itself (stdin closed)


def _session_sshd_pids(test_host) -> list[int]:
    listener = int(test_host.pidfile.read_text())
    children = subprocess.run(["pgrep", "-P", str(listener)], capture_output=True, text=True)
    return [int(p) for p in children.stdout.split()]


def test_timeout_stops_the_remote_run(test_host, remote_python, project, tmp_path, ssh_cache):
    tgt = target(test_host, remote_python, tmp_path)
    pids: list[int] = []
    request = ProfileRequest(
        variants=[{"path": str(project / "slow.py"), "qualname": "slow"}], project_root=project,
        backend="cpu", warmup=1, steps=40, repeats=3, timeout_s=10,
    )  # fmt: skip

    def progress(message):
        if not pids:  # the first message: the agent is up and its pid recorded
            pids.extend(_agent_pids(tmp_path))

    with Store(project) as store, pytest.raises(AgentFailure) as caught:
        asyncio.run(run_profile(request, store, tgt, on_progress=progress))
    assert "longer than 10 s" in caught.value.error["message"]
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids and not any(_alive(p) for p in pids)
