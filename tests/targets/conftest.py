from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.components import needs
from tests.conftest import python_without_trnlens
from tests.targets import sshd

needs_sshd = needs(
    None
    if os.path.exists(sshd.SSHD) and shutil.which("ssh") and os.geteuid() == 0
    else "needs openssh-server and root (scripts/setup.sh installs it)"
)


@pytest.fixture(scope="session")
def test_host(tmp_path_factory):
    host = sshd.start(tmp_path_factory.mktemp("sshd"))
    yield host
    host.stop()


@pytest.fixture(scope="session")
def remote_python(tmp_path_factory) -> Path:
    return python_without_trnlens(tmp_path_factory.mktemp("remote") / "venv")


@pytest.fixture
def ssh_cache(tmp_path, monkeypatch):
    """A private cache (agent bundle, ssh control sockets) per test; its masters closed after.

    Only this test's masters: other test sessions on the machine may hold their own.
    """
    from trnlens.targets.ssh import close_masters

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yield tmp_path / "cache"
    close_masters()
