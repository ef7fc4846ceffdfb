"""Remote faults (issue 13) against a real sshd on 127.0.0.1: the host rebooted between runs, a
login that prints a banner before anything speaks, the artifact download cut short, the
remote disk full. (A connection dropped mid-run, a cancel, a timeout: test_ssh.)

Each ends with a clear message or a working run, and nothing half-written locally.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import tarfile

import pytest
from trnlens.store import Store
from trnlens.targets.base import Staged
from trnlens.targets.ssh import TargetError

from tests.targets import sshd
from tests.targets.conftest import needs_sshd
from tests.targets.test_ssh import profile, target

pytestmark = needs_sshd


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / "m.py").write_text("import torch\n\n\ndef f(x=torch.ones(8)):\n    return x + 1\n")
    return root


@pytest.fixture
def own_host(tmp_path):
    """A host of this test's own (the session's is shared): rebooted or given a login banner."""
    hosts = []

    def start(extra: str = "") -> sshd.TestHost:
        hosts.append(sshd.start(tmp_path / f"sshd{len(hosts)}", alias="trn-own-host", extra=extra))
        return hosts[-1]

    yield start
    for host in hosts:
        host.stop()


def test_host_rebooted_between_runs(own_host, remote_python, project, tmp_path, ssh_cache):
    """The shared connection dies with the host: the next run connects afresh and works."""
    host = own_host()
    tgt = target(host, remote_python, tmp_path)
    first, _ = profile(project, tgt, "m.py::f")
    assert first["error"] is None
    host.reboot()
    second, _ = profile(project, target(host, remote_python, tmp_path), "m.py::f")
    assert second["error"] is None and second["run_id"] != first["run_id"]


BANNER = (
    "ForceCommand echo 'Welcome to trn2-dev: last login yesterday'; "
    'eval "$SSH_ORIGINAL_COMMAND"\n'
)


def test_login_banner_before_the_agent_speaks(own_host, remote_python, project, tmp_path,
                                              ssh_cache):  # fmt: skip
    """Every command's stdout starts with the login's noise (.bashrc, motd scripts)."""
    host = own_host(extra=BANNER)
    tgt = target(host, remote_python, tmp_path)
    outcome, _ = profile(project, tgt, "m.py::f")
    assert outcome["error"] is None and outcome["dispatches_per_step"] == 1
    probed = asyncio.run(target(host, remote_python, tmp_path).probe())
    assert probed["torch"]


def _truncated_archive() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for i in range(3):
            data = bytes(range(256)) * 400
            info = tarfile.TarInfo(f"run/trace{i}.json")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    whole = gzip.compress(raw.getvalue())
    return whole[: len(whole) * 2 // 3]


def test_artifact_download_cut_short_leaves_nothing(project, tmp_path, monkeypatch):
    """The fetch's archive ends early (connection dropped mid-transfer): a clear error, and no
    half-extracted files in the local store."""
    tgt = target(sshd.TestHost("h", 22, tmp_path, tmp_path, tmp_path, tmp_path),
                 tmp_path / "python", tmp_path)  # fmt: skip

    async def checked(argv, what, **kwargs):
        return b"a banner\nTRNLENS-ARCHIVE-FOLLOWS\n" + _truncated_archive()

    monkeypatch.setattr(tgt, "checked", checked)
    staged = Staged({}, run_dir="/remote/runs/x", extras={"local_root": "", "remote_src": "",
                                                          "warnings": []})  # fmt: skip
    with Store(project) as store:
        with pytest.raises(TargetError, match="incomplete"):
            asyncio.run(tgt.collect(staged, {"warnings": []}, store))
        assert list(store.staging_dir().rglob("*")) == []


def test_remote_disk_full_is_said_plainly(project, tmp_path, monkeypatch, remote_python):
    """Simulated: the upload's `cat` fails as it does on a full disk (no full disk here)."""
    tgt = target(sshd.TestHost("h", 22, tmp_path, tmp_path, tmp_path, tmp_path),
                 remote_python, tmp_path)  # fmt: skip
    calls = []

    async def run(argv, stdin=None, timeout=120):
        calls.append(argv)
        if len(calls) == 1:  # PREPARE: the directory is there, the agent is not
            return 0, f"TRNLENS-WORKDIR:{tmp_path}\nNO-BUNDLE\n".encode(), b""
        return 1, b"", b"cat: write error: No space left on device\n"

    monkeypatch.setattr(tgt, "run", run)
    with pytest.raises(TargetError) as caught:
        asyncio.run(tgt.prepare())
    assert "uploading the agent failed" in str(caught.value)
    assert "No space left on device" in str(caught.value)
