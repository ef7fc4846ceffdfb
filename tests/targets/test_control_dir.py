"""The ssh control directory is cleaned up whatever state its masters' sockets are in."""

from __future__ import annotations

import shutil
import socket

from trnlens.targets.ssh import close_masters, control_dir

from tests.components import needs

pytestmark = needs(None if shutil.which("ssh") else "needs OpenSSH's client")


def test_a_stale_socket_does_not_keep_the_directory(tmp_path, monkeypatch):
    """A master killed without taking its socket along (host gone, SIGKILL): nothing listens
    there, `ssh -O exit` fails, and the directory must go all the same."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    directory = control_dir()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(directory / "dead-master"))
    stale.close()  # bound, never listened, closed: the file stays, nobody answers
    assert (directory / "dead-master").is_socket()
    assert close_masters() == 1
    assert not directory.exists()


def test_a_live_socket_that_is_not_a_master_is_left_alone(tmp_path, monkeypatch):
    """Something still listening is never unlinked, so the directory stays for it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr("trnlens.targets.ssh.MASTER_EXIT_WAIT_S", 0.2)
    directory = control_dir()
    live = socket.socket(socket.AF_UNIX)
    try:
        live.bind(str(directory / "busy"))
        live.listen()
        assert close_masters() == 0  # `ssh -O exit` got no master's answer: not told
        assert (directory / "busy").is_socket()
    finally:
        live.close()
        (directory / "busy").unlink()
        directory.rmdir()
