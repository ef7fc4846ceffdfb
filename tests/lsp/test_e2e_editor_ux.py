"""End to end, as an editor user meets it (issue 23): refusals said once and plainly, a cancelled
run's lens back to ▶ Profile, missing inputs fixed from a quick fix, Undo showing the run that
measured the restored text, no lens on an inputs factory."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from .session import FAST, editor, workspace

SCALE = "import torch\n\n\ndef scale(x, weight):\n    return torch.mul(x, weight)\n"


async def test_a_refusal_is_one_error_answer_without_class_names_and_no_message(tmp_path):
    root = workspace(tmp_path)
    async with editor(root, {**FAST, "trusted": False}) as ed:
        uri = ed.open()
        arguments = {"uri": uri, "qualname": "rmsnorm_naive"}
        with pytest.raises(JsonRpcException) as caught:
            await ed.command("trnlens.server.profile", arguments)
        message = str(caught.value)
        assert message.startswith("this workspace is not trusted"), message
        assert "Error" not in message and "trnlens.lsp" not in message
        assert caught.value.data == {"severity": "warning"}
        with pytest.raises(JsonRpcException) as caught:
            await ed.command("trnlens.server.report", {"uri": uri, "qualname": "rmsnorm_naive"})
        assert "trnlens.lsp" not in str(caught.value)
        # The answer is the one place it is said: an editor shows it; a message would repeat it.
        assert ed.client.messages == []


async def test_a_cancelled_run_s_lens_reads_profile_once_the_cancel_answers(tmp_path):
    root = workspace(tmp_path)
    async with editor(root) as ed:
        uri = ed.open()
        answer = await ed.click((await ed.lenses(uri))["sleepy"])
        await ed.wait_for(
            lambda: any(
                "measuring" in str(getattr(r, "message", "")) for r in ed.progress(answer["token"])
            ),
            timeout=120,
            what="the run measuring",
        )
        lens = (await ed.lenses(uri))["sleepy"]
        assert lens.command.title.startswith("■ running")
        refreshes = ed.refreshes["codeLens"]
        await ed.click(lens)  # the lens's own command: cancel
        # When cancel answers, the job is gone and the editor was told to ask again.
        assert ed.refreshes["codeLens"] > refreshes or await ed.wait_for(
            lambda: ed.refreshes["codeLens"] > refreshes, what="a lens refresh"
        )
        assert (await ed.lenses(uri))["sleepy"].command.title == "▶ Profile"


async def test_missing_inputs_short_message_lens_diagnostic_and_a_quick_fix_that_profiles(tmp_path):
    root = workspace(tmp_path)
    (root / "scale.py").write_text(SCALE, "utf-8")
    async with editor(root) as ed:
        uri = ed.open("scale.py")
        _, end = await ed.profile(uri, "scale")
        assert end.message.startswith("failed: scale(x, weight) needs arguments"), end.message
        # the failure is shown once the run is stored (off the loop), maybe after the progress end
        shown = await ed.wait_for(
            lambda: [m for m in ed.client.messages if "scale" in m.message], what="the message"
        )
        assert len(shown) == 1 and "\n" not in shown[0].message, shown
        assert shown[0].type == types.MessageType.Warning
        assert "quick fix" in shown[0].message and "def " not in shown[0].message
        assert (await ed.lenses(uri))["scale"].command.title == "▶ Profile · failed: needs inputs"
        [diagnostic] = await ed.wait_for(
            lambda: ed.diagnostics(uri, "missing-inputs"), what="the missing-inputs warning"
        )
        assert diagnostic.range.start.line == 3 and diagnostic.severity == 2
        actions = await ed.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri),
                range=diagnostic.range,
                context=types.CodeActionContext(diagnostics=[diagnostic]),
            )
        )
        [fix] = [a for a in actions if "inputs factory" in a.title]
        assert fix.is_preferred
        # Applied as an editor does: every edit against the original text, those at the same
        # place in the order given.
        lines = SCALE.splitlines(keepends=True)
        inserted: dict[int, str] = {}
        for edit in fix.edit.changes[uri]:
            assert edit.range.start == edit.range.end and edit.range.start.character == 0
            line = edit.range.start.line
            inserted[line] = inserted.get(line, "") + edit.new_text
        text = "".join(inserted.get(i, "") + line for i, line in enumerate(lines))
        ed.edit(uri, 0, 0, text, end=(len(lines), 0))
        assert "# trnlens: inputs=scale_inputs\ndef scale(x, weight):" in text
        assert "def scale_inputs():" in text and "torch.randn(8, 64), torch.randn(64,)" in text
        # The directive answers the warning; the factory gets no lens of its own.
        await ed.wait_for(lambda: not ed.diagnostics(uri, "missing-inputs"), what="no warning")
        lenses = await ed.lenses(uri)
        assert set(lenses) == {"scale"} and lenses["scale"].command.title == "▶ Profile"
        _, end = await ed.profile(uri, "scale")
        assert end.message.startswith("scale: "), end.message
        assert "· 1 dispatch" in (await ed.lenses(uri))["scale"].command.title


async def test_undo_shows_the_run_that_measured_the_restored_text(tmp_path):
    root = workspace(tmp_path)
    text = (root / "model.py").read_text("utf-8")
    body = next(i for i, line in enumerate(text.splitlines()) if "torch.rms_norm" in line)
    async with editor(root) as ed:
        uri = ed.open()
        _, first = await ed.profile(uri, "rmsnorm_fused")
        ed.edit(uri, body, 0, "    x = x * 1.0\n")
        assert "stale" in (await ed.lenses(uri))["rmsnorm_fused"].command.title
        _, second = await ed.profile(uri, "rmsnorm_fused")
        assert "2 dispatches" in second.message and "1 dispatch" in first.message
        newer = (await ed.lenses(uri))["rmsnorm_fused"].command.title
        assert "stale" not in newer and "2 dispatches" in newer
        ed.edit(uri, body, 0, "", end=(body + 1, 0))  # the Undo
        title = (await ed.lenses(uri))["rmsnorm_fused"].command.title
        assert "stale" not in title and "· 1 dispatch ·" in title, title
        ed.edit(uri, body, 0, "    x = x * 1.0\n")  # and Redo: the newer run again
        title = (await ed.lenses(uri))["rmsnorm_fused"].command.title
        assert "stale" not in title and "2 dispatches" in title, title
        # Cleared results stay cleared: no Undo brings one back.
        await ed.command("trnlens.server.clearResults", {"uri": uri})
        ed.edit(uri, body, 0, "", end=(body + 1, 0))
        assert (await ed.lenses(uri))["rmsnorm_fused"].command.title == "▶ Profile"


async def test_editing_the_inputs_factory_makes_the_run_stale(tmp_path):
    root = workspace(tmp_path)
    text = (root / "model.py").read_text("utf-8")
    factory = next(i for i, line in enumerate(text.splitlines()) if "def small_inputs" in line)
    async with editor(root) as ed:
        uri = ed.open()
        await ed.profile(uri, "rmsnorm_fused")
        assert "stale" not in (await ed.lenses(uri))["rmsnorm_fused"].command.title
        # (and Neuron Explorer says why a CPU run has nothing to show, before reaching any host)
        with pytest.raises(JsonRpcException, match="ran on CPU, so it has no Neuron profile"):
            await ed.command(
                "trnlens.server.openExplorer", {"uri": uri, "qualname": "rmsnorm_fused"}
            )
        ed.edit(uri, factory + 1, 0, "    torch.manual_seed(0)\n")
        assert "stale" in (await ed.lenses(uri))["rmsnorm_fused"].command.title
