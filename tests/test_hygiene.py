"""The session's leftover check itself: what counts as left behind and what is the session's own."""

from __future__ import annotations

import socket

from tests import hygiene


def test_files_outside_the_sessions_own_folders_are_leftovers(tmp_path):
    (tmp_path / "pytest-of-someone").mkdir()
    (tmp_path / hygiene.CACHE / "trnlens").mkdir(parents=True)
    (tmp_path / hygiene.CACHE / "trnlens" / "trnlens-agent-1.pyz").write_bytes(b"zip")
    (tmp_path / "trnlens-ssh-0-abc").mkdir()
    found = hygiene.leftovers(tmp_path, "NO_SUCH_MARK_FOR_THIS_TEST")
    assert found.files == ["trnlens-ssh-0-abc"]
    assert not found.processes


def test_a_socket_left_in_the_cache_is_a_leftover(tmp_path):
    sockets = tmp_path / hygiene.CACHE / "trnlens" / "ssh"
    sockets.mkdir(parents=True)
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(sockets / "master"))
        found = hygiene.leftovers(tmp_path, "NO_SUCH_MARK_FOR_THIS_TEST")
    finally:
        listener.close()
    assert found.files == [f"{hygiene.CACHE}/trnlens/ssh/master"]
