"""End to end: a lens click profiles on a remote target over a real OpenSSH server."""

from __future__ import annotations

from tests.targets.conftest import (  # noqa: F401
    needs_sshd,
    remote_python,
    ssh_cache,
    test_host,
)

from .session import FAST, editor, workspace

pytestmark = needs_sshd


async def test_lens_profiles_on_the_remote_host(tmp_path, test_host, remote_python, ssh_cache):  # noqa: F811
    root = workspace(tmp_path)
    remote = {
        "host": test_host.alias, "ssh_args": test_host.ssh_args(), "python": str(remote_python),
        "workdir": str(tmp_path / "remote work"), "backend": "cpu",
    }  # fmt: skip
    options = {**FAST, "targets": {"trn2-dev": remote}, "target": "trn2-dev"}
    async with editor(root, options) as ed:
        uri = ed.open()
        lens = (await ed.lenses(uri))["rmsnorm_naive"]
        assert lens.command.title == "▶ Profile on trn2-dev"
        answer = await ed.click(lens)
        end = await ed.wait_for_end(answer["token"])
        assert "6 dispatches" in end.message, end.message
        title = (await ed.lenses(uri))["rmsnorm_naive"].command.title
        # CPU labels, or the unprofiled median when the profiler inflated the tiny steps.
        assert "6 dispatches" in title and ("CPU" in title or "unprofiled" in title)
    runs = list((root / ".trnlens" / "artifacts").iterdir())
    assert len(runs) == 1 and (runs[0] / "trace.json").exists()
    assert not list((tmp_path / "remote work" / "runs").iterdir())
