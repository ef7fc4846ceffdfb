from __future__ import annotations

import os
import shlex
import shutil
import subprocess
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


@pytest.fixture(scope="session")
def hidden_site_python(tmp_path_factory) -> Path:
    """A "remote" python whose torch and transformers live at a path only it can read.

    Its site-packages come through ``view/``, an empty folder on this machine: the interpreter
    starts in a mount namespace of its own (``unshare -m``) where our site-packages are bound
    onto ``view/``. The server, reading the same paths here, finds nothing: whatever library
    text it analyses came over the connection."""
    import sysconfig

    base = tmp_path_factory.mktemp("hidden")
    python = python_without_trnlens(base / "venv", with_torch=False)
    view = base / "view"
    view.mkdir()
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "view.pth").write_text(f"{view}\n")
    wrapper = base / "python-hidden"
    wrapper.write_text(
        "#!/bin/sh\n"
        'exec unshare -m sh -c \'mount --bind "$1" "$2" && shift 2 && exec "$@"\' '
        f"sh {shlex.quote(sysconfig.get_paths()['purelib'])} {shlex.quote(str(view))} "
        f'{shlex.quote(str(python))} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper
