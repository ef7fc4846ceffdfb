"""The run report from a real LSP client: the lens after a run, the hover link, the command."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types

from .session import editor, workspace

NAIVE_DEF = 12  # 0-based, fixtures/model.py
REPORT = "trnlens.server.report"


async def test_report_lens_hover_link_and_command_after_a_run(tmp_path):
    root = workspace(tmp_path)
    async with editor(root) as ed:
        uri = ed.open()
        before = await ed.client.text_document_code_lens_async(
            types.CodeLensParams(types.TextDocumentIdentifier(uri))
        )
        # Lenses with figures come without a command until resolved (codeLens/resolve); the
        # report lens always carries its own.
        assert not [lens for lens in before if lens.command and lens.command.command == REPORT]
        await ed.profile(uri, "rmsnorm_naive")
        found = await ed.client.text_document_code_lens_async(
            types.CodeLensParams(types.TextDocumentIdentifier(uri))
        )
        reports = [lens for lens in found if lens.command and lens.command.command == REPORT]
        assert len(reports) == 1 and reports[0].range.start.line == NAIVE_DEF
        argument = reports[0].command.arguments[0]
        assert argument["qualname"] == "rmsnorm_naive" and argument["show"] is True
        assert reports[0].command.title == "▦ Report"

        # The hover's link runs the same command with the same argument.
        hover = await ed.hover(uri, NAIVE_DEF, 6)
        link = next(line for line in hover.contents.value.splitlines() if "run report" in line)
        encoded = link.split(f"command:{REPORT}?", 1)[1].split(")", 1)[0]
        assert json.loads(unquote(encoded)) == [argument]

        # Clicking the lens builds the page and asks the client to show it (a browser).
        answer = await ed.click(reports[0])
        page = Path(answer["path"])
        assert page.is_file() and page.name == "report.html"
        assert answer["runIds"] == [argument["runId"]] and answer["root"] == str(root)
        assert answer["title"] == f"Report {argument['qualname']}"  # a tab by function
        assert "aten::pow" in page.read_text("utf-8")
        await ed.wait_for(lambda: ed.client.shown_documents, what="showDocument")
        shown = ed.client.shown_documents[0]
        assert shown.uri == page.as_uri() and shown.external

        # By function, without showing: the same page, reused.
        again = await ed.command(REPORT, {"uri": uri, "qualname": "rmsnorm_naive"})
        assert again["path"] == answer["path"] and again["reused"]
        assert len(ed.client.shown_documents) == 1


async def test_report_command_says_what_is_missing(tmp_path):
    root = workspace(tmp_path)
    async with editor(root) as ed:
        uri = ed.open()
        try:
            await ed.command(REPORT, {"uri": uri, "qualname": "rmsnorm_naive"})
        except Exception as exc:  # the command's error response
            assert "no runs stored" in str(exc)
        else:
            raise AssertionError("a report without runs was answered")
        assert not (root / ".trnlens").exists()
