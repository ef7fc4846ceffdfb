"""Library findings on a remote host (issue 32): the tiny transformers Llama profiled over the test
sshd, its library files readable only there (``hidden_site_python``), their texts brought back
over the agent's connection by digest into the local cache; then ``compare --fix``'s module swap
measured on the same host."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import sysconfig
from pathlib import Path

import jsonschema
import pytest
from trnlens.jobs import AgentProcess, ProfileRequest, run_profile
from trnlens.libraries import swap, texts
from trnlens.results import schema
from trnlens.store import Store
from trnlens.targets.ssh import SshTarget

from tests.ranks.conftest import live_processes_naming
from tests.targets.conftest import needs_sshd
from tests.targets.test_ssh import FAST, REPO, remote_runs, target

pytestmark = needs_sshd
SPEC = ("samples/tiny_llama.py", "logits")
LLAMA = Path(sysconfig.get_paths()["purelib"], "transformers/models/llama/modeling_llama.py")


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "samples").mkdir(parents=True)
    shutil.copy(REPO / "samples" / "tiny_llama.py", root / "samples" / "tiny_llama.py")
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    return root


def test_library_findings_and_their_swap_come_from_the_hosts_files(
    test_host, hidden_site_python, project, tmp_path, ssh_cache, monkeypatch
):
    asked: list[list[str]] = []
    real_files = AgentProcess.files

    async def files(self, sha256):
        asked.append(list(sha256))
        return await real_files(self, sha256)

    monkeypatch.setattr(AgentProcess, "files", files)
    commands: list[str] = []  # what went over ssh besides the agent's own connection
    real_checked = SshTarget.checked

    async def checked(self, argv, what, **kwargs):
        commands.append(what)
        return await real_checked(self, argv, what, **kwargs)

    monkeypatch.setattr(SshTarget, "checked", checked)
    tgt = target(test_host, hidden_site_python, tmp_path)
    path, qualname = SPEC

    def run(variants):
        request = ProfileRequest(variants=variants, project_root=project, backend="cpu", **FAST)
        with Store(project) as store:
            return asyncio.run(run_profile(request, store, tgt)).data

    first = run([{"path": str(project / path), "qualname": qualname}])
    assert first["error"] is None, first["error"]
    jsonschema.validate(first, schema())  # schema 4: library_files' digests, library_copies
    (finding,) = [f for f in first["library_findings"] if f["code"] == "TRN001"]
    remote_path = finding["path"]
    # The host's path: on this machine that folder is empty, so the text came over ssh.
    assert remote_path.endswith("/view/transformers/models/llama/modeling_llama.py")
    assert not os.path.exists(remote_path)
    assert finding["message"].startswith(
        "LlamaRMSNorm (transformers 4.57.6, modeling_llama.py:62) is a naive RMSNorm: "
        "8 dispatches a call, 5 calls, 40 of "
    )
    assert finding["callers"][0]["path"] == path
    digest = hashlib.sha256(LLAMA.read_bytes()).hexdigest()
    (entry,) = [e for e in first["library_files"] if e["path"] == remote_path]
    assert entry["sha256"] == digest and entry["bytes"] == LLAMA.stat().st_size
    copy = texts.cached(digest)  # the cache holds it under its digest, as the host has it
    assert copy is not None and copy.read_bytes() == LLAMA.read_bytes()
    assert copy.is_relative_to(ssh_cache)
    assert first["library_copies"][remote_path] == str(copy)
    assert first["library_digests"][remote_path] == digest
    assert len(asked) == 1 and digest in asked[0]
    # The artifacts came on the agent's connection too: no ssh command fetched them.
    assert (project / ".trnlens" / "artifacts" / first["run_id"] / "trace.json").is_file()
    assert "fetching artifacts" not in commands

    # compare --fix: the swap re-derived from the cached text, measured on the host.
    with Store(project) as store:
        stored = swap.latest_function_run(store, path, qualname)
    original, swapped, _compiled = swap.swap_variants(path, qualname, stored)
    outcome = run([original, swapped])
    assert [v["variant"]["kind"] for v in outcome["variants"]] == ["function", "swap"]
    before, after = outcome["variants"]
    assert before["dispatches_per_step"] - after["dispatches_per_step"] == 20
    assert outcome["max_abs_diff"][1] == 0.0
    assert not [f for f in after.get("library_findings") or [] if f["code"] == "TRN001"]
    # Every file of the second run was cached already: nothing more was asked for.
    assert len(asked) == 1
    assert remote_runs(tmp_path) == []
    assert live_processes_naming(str(tmp_path / "remote work")) == []
