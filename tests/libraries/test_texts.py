"""The server's side of a remote run's library texts: the content-addressed cache, filled by
digest from the agent's real ``files`` answers (agent/libraryfiles/, through the protocol's own
lines), only with what it lacks; the rules read it, never the run's paths."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest
from trnlens.agent.libraryfiles import contents
from trnlens.agent.libraryfiles.digests import Digests
from trnlens.agent.protocol import (
    FileContents,
    Files,
    format_message,
    parse_agent_message,
    parse_request,
)
from trnlens.libraries import rules, texts

NAIVE = """
import torch


class Norm(torch.nn.Module):
    def forward(self, x):
        v = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(v + 1e-6)
"""


def _agent(digests: Digests, asked: list):
    async def ask(sha256: list[str]) -> list[dict]:
        asked.append(sha256)
        request = parse_request(format_message(Files(id="f1", sha256=sha256)))
        assert isinstance(request, Files)
        answer = FileContents(id="f1", files=contents.answer(digests, request.sha256))
        message = parse_agent_message(format_message(answer))
        assert isinstance(message, FileContents)
        return message.files

    return ask


def test_the_cache_is_filled_by_digest_once_and_the_rules_read_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    host = tmp_path / "host" / "lib" / "norms.py"
    host.parent.mkdir(parents=True)
    host.write_text(NAIVE)
    digests = Digests()
    run = {"library_files": [{"path": str(host), "library": {"name": "lib", "version": "1"}}]}
    digests.annotate(run)
    sha = hashlib.sha256(NAIVE.encode()).hexdigest()
    asked: list = []
    assert asyncio.run(texts.fetch(_agent(digests, asked), [run])) == []
    assert asked == [[sha]] and texts.cached(sha).read_text() == NAIVE
    assert asyncio.run(texts.fetch(_agent(digests, asked), [run])) == []
    assert asked == [[sha]]  # cached: not asked again

    host.unlink()  # the rules read the cache by digest, never the run's path
    analysed = rules.analysed_file(str(host), texts.reader(run))
    assert analysed is not None and {f.code for f in analysed.findings} == {"TRN001"}
    assert rules.analysed_file(str(host)) is None


def test_what_cannot_come_is_a_warning_on_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    host = tmp_path / "norms.py"
    host.write_text(NAIVE)
    digests = Digests()
    run = {"library_files": [{"path": str(host), "library": None}], "warnings": []}
    digests.annotate(run)
    host.write_text(NAIVE + "# upgraded\n")
    notes = asyncio.run(texts.fetch(_agent(digests, []), [run]))
    assert notes == [f"library files not read from the host: {host}: {host} changed since the run"]
    assert run["warnings"] == notes


def test_bytes_that_do_not_match_their_digest_are_not_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="do not match"):
        texts.keep("0" * 64, "x.py", b"x = 1\n")
    assert texts.cached("0" * 64) is None
    assert texts.cached("../../etc") is None


def test_the_cache_keeps_its_bound_and_the_copies_used_last(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    kept = []
    for n in range(3):
        data = f"x = {n}\n".encode()
        sha = hashlib.sha256(data).hexdigest()
        texts.keep(sha, f"m{n}.py", data)
        os.utime(texts.cache_root() / sha, (1000 + n, 1000 + n))  # older first
        kept.append(sha)
    assert texts.cached(kept[0]) is not None  # read now: used last
    assert texts.prune(max_bytes=12) == 1  # 6 bytes each: two stay
    assert texts.cached(kept[1]) is None
    assert texts.cached(kept[0]) is not None and texts.cached(kept[2]) is not None
