"""End to end: failing runs, unsaved buffers, the queue, cancellation, targets and trust."""

from __future__ import annotations

import asyncio
import os

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from .session import FAST, editor, workspace


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


async def test_raising_function_gets_an_error_on_the_raising_line_also_after_reopen(tmp_path):
    root = workspace(tmp_path)
    text = (root / "model.py").read_text("utf-8")
    raising = _line(text, "raise ValueError")
    async with editor(root) as ed:
        uri = ed.open()
        _, end = await ed.profile(uri, "broken")
        assert "broken raised: ValueError: bad shapes on purpose: (64, 256)" in end.message
        errors = await ed.wait_for(
            lambda: ed.diagnostics(uri, "run-user_code"), what="the error diagnostic"
        )
        assert [d.range.start.line for d in errors] == [raising]
        assert errors[0].severity == types.DiagnosticSeverity.Error
        assert errors[0].message.startswith("ValueError: bad shapes on purpose: (64, 256)")
        assert "· failed: ValueError ·" in (await ed.lenses(uri))["broken"].command.title
        assert ed.diagnostics(uri, "hotspot") == []

    # A new session (the editor reopened) shows the stored run: no profile runs here.
    async with editor(root) as ed:
        uri = ed.open()
        errors = await ed.wait_for(lambda: ed.diagnostics(uri, "run-user_code"), what="error")
        assert [d.range.start.line for d in errors] == [raising]
        assert "failed: ValueError" in (await ed.lenses(uri))["broken"].command.title


async def test_unsaved_buffer_is_what_gets_profiled(tmp_path):
    root = workspace(tmp_path)
    on_disk = (root / "model.py").read_text("utf-8")
    fused = "    return torch.rms_norm(x, (x.shape[-1],), weight, eps)\n"
    assert fused in on_disk
    buffer = on_disk.replace(
        fused, "    y = torch.rms_norm(x, (x.shape[-1],), weight, eps)\n    return y.sin()\n"
    )
    async with editor(root) as ed:
        uri = ed.open(text=buffer)  # opened with edits the file on disk does not have
        _, end = await ed.profile(uri, "rmsnorm_fused")
        assert "2 dispatches" in end.message, end.message  # rms_norm + sin: the buffer ran
        hints = {h.position.line: h.label for h in await ed.hints(uri)}
        assert set(hints) == {_line(buffer, "y = torch.rms_norm"), _line(buffer, "y.sin()")}
        assert all(label.endswith("· 1 dispatch") for label in hints.values())
        title = (await ed.lenses(uri))["rmsnorm_fused"].command.title
        assert "stale" not in title and "2 dispatches" in title
    assert (root / "model.py").read_text("utf-8") == on_disk  # nothing was written to the file


async def test_one_run_at_a_time_the_queue_and_cancel(tmp_path):
    root = workspace(tmp_path)
    async with editor(root) as ed:
        uri = ed.open()
        lenses = await ed.lenses(uri)
        first = await ed.click(lenses["sleepy"])
        second = await ed.click(lenses["rmsnorm_fused"])
        third = await ed.click(lenses["broken"])
        assert second["state"] == "queued" and second["position"] == 1
        assert third["position"] == 2
        begin = ed.progress(second["token"])[0]
        assert isinstance(begin, types.WorkDoneProgressBegin) and begin.cancellable
        assert begin.message.startswith("queued behind sleepy on local")
        # The same function is never queued twice: clicking again answers the pending job.
        again = await ed.click(lenses["rmsnorm_fused"])
        assert again["alreadyPending"] and again["token"] == second["token"]
        assert (await ed.click(lenses["sleepy"]))["token"] == first["token"]

        def phases() -> set[str]:  # the first word of each progress message sleepy sent
            said = [getattr(r, "message", "") or "" for r in ed.progress(first["token"])]
            return {message.split()[0] for message in said if message}

        # Once sleepy runs, its phases (importing, building-inputs, warm-up) go to its progress
        # only: the lens is its ■ cancel button, and a redraw under the user's pointer loses the
        # click in VS Code, so no phase redraws it.
        await ed.wait_for(lambda: "importing" in phases(), 60, "sleepy's first phase")
        redraws = ed.refreshes["codeLens"]
        # Wait until sleepy is inside the user's code (its warm-up call sleeps 30 s).
        await ed.wait_for(lambda: "warm-up" in phases(), 120, "sleepy's warm-up")
        assert ed.refreshes["codeLens"] == redraws
        # Lenses tell who runs and who waits, and every other request is answered meanwhile.
        states = await asyncio.wait_for(ed.lenses(uri), 5)
        assert states["sleepy"].command.title == "■ running · click to cancel"
        assert states["sleepy"].command.command == "trnlens.server.cancel"
        assert states["rmsnorm_fused"].command.title.startswith("■ queued (#1)")
        await asyncio.wait_for(ed.hover(uri, 3), 5)
        await asyncio.wait_for(ed.hints(uri), 5)

        # A queued job cancelled by command never starts.
        done = await ed.command("trnlens.server.cancel", {"uri": uri, "qualname": "broken"})
        assert done == {"cancelled": 1}
        assert (await ed.wait_for_end(third["token"], 5)).message == "cancelled before it started"

        # Cancelling the running one from its progress (the editor's cancel button).
        ed.client.window_work_done_progress_cancel(
            types.WorkDoneProgressCancelParams(token=first["token"])
        )
        # 1 s grace, then the agent is killed: a deadline far below the 30 s the run sleeps
        end = await ed.wait_for_end(first["token"], 10)
        assert end.message == "cancelled"

        # The queue goes on: the waiting run now runs (on a fresh agent) and completes.
        end = await ed.wait_for_end(second["token"])
        assert end.message.startswith("rmsnorm_fused: ") and "1 dispatch" in end.message
        after = await ed.lenses(uri)
        assert after["sleepy"].command.title == "▶ Profile"  # a cancelled run leaves no figures
        assert "1 dispatch" in after["rmsnorm_fused"].command.title


async def test_unreachable_remote_target_fails_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = workspace(tmp_path)
    options = {**FAST, "targets": {"trn2-dev": {"host": "trn2.invalid"}}, "target": "trn2-dev"}
    async with editor(root, options) as ed:
        uri = ed.open()
        lens = (await ed.lenses(uri))["rmsnorm_naive"]
        assert lens.command.title == "▶ Profile on trn2-dev"
        assert lens.command.arguments[0]["target"] == "trn2-dev"
        answer = await ed.click(lens)
        end = await ed.wait_for_end(answer["token"], 60)
        assert end.message.startswith("failed: environment error: cannot reach trn2.invalid")
        # Picking the local target from the session makes the lens local again.
        picked = await ed.command("trnlens.server.selectTarget", {"target": "local"})
        assert picked == {"target": "local", "targets": ["local", "trn2-dev"]}
        assert (await ed.lenses(uri))["rmsnorm_naive"].command.title == "▶ Profile"
        # Without a name the server asks the user (window/showMessageRequest).
        ed.pick = "trn2-dev"
        picked = await ed.command("trnlens.server.selectTarget")
        assert picked["target"] == "trn2-dev"
        assert [a.title for a in ed.questions[-1].actions] == ["local", "trn2-dev"]
        assert (await ed.lenses(uri))["rmsnorm_naive"].command.title == "▶ Profile on trn2-dev"


REPO_TARGET = """
[tool.trnlens]
target = "repo-box"

[tool.trnlens.targets.repo-box]
python = "bin/python"
"""


def _repository_interpreter(root):
    """The repository's own 'interpreter': leaves a marker when anything runs it."""
    script = root / "bin" / "python"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\ntouch "$(dirname "$0")/../ran-repo-python"\nexit 3\n')
    os.chmod(script, 0o755)
    return root / "ran-repo-python"


async def test_untrusted_workspace_refuses_targets_from_the_repository(tmp_path):
    root = workspace(tmp_path, REPO_TARGET)
    marker = _repository_interpreter(root)
    async with editor(root, {**FAST, "trusted": False}) as ed:
        uri = ed.open()
        lens = (await ed.lenses(uri))["rmsnorm_naive"]
        assert lens.command.title == "▶ Profile"  # the repository's target is not used
        with pytest.raises(JsonRpcException, match="not trusted"):
            arguments = {**lens.command.arguments[0], "target": "repo-box"}
            await ed.command("trnlens.server.profile", arguments)
        with pytest.raises(JsonRpcException, match="not trusted"):
            await ed.command("trnlens.server.selectTarget", {"target": "repo-box"})
        # Analysis only: not even the local target runs the repository's code.
        with pytest.raises(JsonRpcException, match="workspace is not trusted"):
            await ed.click(lens)
    assert not marker.exists()


async def test_trusted_workspace_uses_the_repository_target(tmp_path):
    root = workspace(tmp_path, REPO_TARGET)
    marker = _repository_interpreter(root)
    async with editor(root) as ed:  # says nothing about trust: trusted
        uri = ed.open()
        lens = (await ed.lenses(uri))["rmsnorm_naive"]
        assert lens.command.title == "▶ Profile on repo-box"
        answer = await ed.click(lens)
        end = await ed.wait_for_end(answer["token"], 60)
        assert end.message.startswith("failed: environment error: the agent did not start")
        shown = [m.message for m in ed.client.messages]
        assert any("profiling rmsnorm_naive failed" in m for m in shown), shown
    assert marker.exists()


async def test_a_malformed_setting_is_reported_once_and_the_defaults_used(tmp_path):
    root = workspace(tmp_path, "[tool.trnlens]\nhotspot_threshold = 5\n")
    async with editor(root) as ed:
        uri = ed.open()
        warnings = await ed.wait_for(
            lambda: [m for m in ed.client.messages if "trnlens settings" in m.message],
            what="the settings warning",
        )
        assert "trnlens.hotspotThreshold (from pyproject.toml) is a share between 0 and 1" in (
            warnings[0].message
        )
        assert warnings[0].type == types.MessageType.Warning
        assert (await ed.lenses(uri))["rmsnorm_naive"].command.title == "▶ Profile"
        ed.open("model.py")  # opening again does not repeat it
        await ed.lenses(uri)
        assert len([m for m in ed.client.messages if "trnlens settings" in m.message]) == 1
        with pytest.raises(JsonRpcException, match="hotspotThreshold"):
            await ed.click((await ed.lenses(uri))["rmsnorm_naive"])


async def test_a_run_past_timeout_seconds_is_stopped_and_reported(tmp_path):
    root = workspace(tmp_path)
    async with editor(root, {**FAST, "timeoutSeconds": 4}) as ed:
        uri = ed.open()
        answer = await ed.click((await ed.lenses(uri))["sleepy"])
        # it sleeps 30 s in its first call: ending before this deadline, it was stopped
        end = await ed.wait_for_end(answer["token"], 20)
        assert end.message == "failed: timed out after 4 s (trnlens.timeoutSeconds)"
        # the message follows the progress's end (its own notification)
        await ed.wait_for(lambda: any("timed out" in m.message for m in ed.client.messages))
        assert (await ed.lenses(uri))["sleepy"].command.title == "▶ Profile"


async def test_a_target_set_in_the_settings_after_a_pick_takes_effect(tmp_path):
    """Issue 42, point 3: a target picked for the session, then trnlens.target changed in the
    settings: the lens and the run follow the setting (the status bar shows it), not the pick."""
    root = workspace(tmp_path)
    targets = {"box-a": {"host": "a.invalid"}, "box-b": {"host": "b.invalid"}}
    async with editor(root, {**FAST, "targets": targets}) as ed:
        uri = ed.open()
        await ed.command("trnlens.server.selectTarget", {"target": "box-a"})
        assert (await ed.lenses(uri))["rmsnorm_naive"].command.title == "▶ Profile on box-a"
        ed.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"trnlens": {**FAST, "targets": targets, "target": "box-b"}}
            )
        )
        # one stream, handled in order: the notification before the next request
        lens = (await ed.lenses(uri))["rmsnorm_naive"]
        assert lens.command.title == "▶ Profile on box-b"
        assert lens.command.arguments[0]["target"] == "box-b"
        picked = await ed.command("trnlens.server.selectTarget", {"target": "box-a"})
        assert picked["target"] == "box-a"  # a pick after the change wins again
        # the same settings again (another key changed): the pick stays
        ed.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"trnlens": {**FAST, "targets": targets, "target": "box-b", "steps": 4}}
            )
        )
        assert (await ed.lenses(uri))["rmsnorm_naive"].command.title == "▶ Profile on box-a"
