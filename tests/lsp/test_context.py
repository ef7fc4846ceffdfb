"""The features' context (lsp/context.py) with a stand-in client: documents wait for their
preparation, publishing says only what changed, stores are made only for runs."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from lsprotocol import types
from trnlens.lsp import documents
from trnlens.lsp.context import Context


class StandInClient:
    """Records what the context tells the editor (a stand-in for lsp/client.py's LspClient)."""

    def __init__(self) -> None:
        self.published: list[tuple[str, int]] = []

    def publish_diagnostics(self, uri: str, diagnostics: list[types.Diagnostic]) -> None:
        self.published.append((uri, len(diagnostics)))

    def workspace_root(self) -> Path | None:
        return None

    def workspace_folders(self) -> list[Path]:
        return []


def context(tmp_path: Path) -> tuple[Context, StandInClient, str]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    client = StandInClient()
    return Context(client), client, (tmp_path / "model.py").as_uri()  # type: ignore[arg-type]


async def test_a_request_waits_for_the_document_being_prepared(tmp_path):
    ctx, _, uri = context(tmp_path)
    doc = ctx.add_document(uri, "def f():\n    pass\n")
    assert doc is not None and ctx.add_document(tmp_path.as_uri() + "/notes.txt", "") is None
    ready = ctx.opening(uri)
    order: list[str] = []

    async def ask() -> object:
        found = await ctx.document(uri)
        order.append("answered")
        return found

    asked = asyncio.get_running_loop().create_task(ask())  # its first step runs first
    asyncio.get_running_loop().call_soon(lambda: (order.append("opened"), ctx.opened(uri, ready)))
    assert await asyncio.wait_for(asked, 5) is doc
    assert order == ["opened", "answered"]  # it waited for the preparation
    assert await ctx.document(uri) is doc  # prepared: no wait


async def test_publishing_says_only_what_changed_and_closing_takes_it_back(tmp_path):
    ctx, client, uri = context(tmp_path)
    ctx.add_document(uri, "x = 1\n")
    ctx.diagnostics.register("one", lambda doc, settings: [])
    ctx.publish(uri)
    assert client.published == []  # nothing to say, nothing said before
    ctx.publish(uri, force=True)
    assert ctx.close_document(uri) and not ctx.close_document(uri)
    assert client.published == [(uri, 0), (uri, 0)]


def test_a_store_is_made_only_for_a_run(tmp_path):
    ctx, _, _ = context(tmp_path)
    assert ctx.store(tmp_path) is None and not (tmp_path / ".trnlens").exists()
    store = ctx.run_store(tmp_path)
    assert ctx.store(tmp_path) is store and (tmp_path / ".trnlens" / "runs.sqlite").exists()
    ctx.close_stores()


async def test_an_edited_text_is_parsed_off_the_loop_and_published_once_parsed(
    tmp_path, monkeypatch
):
    ctx, client, uri = context(tmp_path)
    doc = ctx.add_document(uri, "def f():\n    pass\n")
    assert doc is not None
    ctx.diagnostics.register("one", lambda doc, settings: [types.Diagnostic(
        types.Range(types.Position(0, 0), types.Position(0, 1)), "x")])  # fmt: skip
    loop_thread = threading.get_ident()
    parsed_in: list[int] = []
    real = documents.analyse
    edited: list[str] = []

    def analyse(text):
        parsed_in.append(threading.get_ident())
        return real(text)

    monkeypatch.setattr(documents, "analyse", analyse)  # which thread made the parse
    doc.update("def f():\n    pass\n\n\ndef g():\n    pass\n", [{"text": "x"}])
    ctx.reparse(doc, lambda d: (edited.append(d.text), ctx.publish(d.uri)))
    ctx.publish(uri, force=True)  # meanwhile: deferred until the parse is in
    assert client.published == [] and ctx.preparing(uri)
    assert await asyncio.wait_for(ctx.document(uri), 5) is doc  # waits for the parse
    assert parsed_in and loop_thread not in parsed_in
    assert doc.parsed() and set(doc.analysis().symbols) == {"f", "g"}
    assert edited == [doc.text] and client.published == [(uri, 1)]  # once, forced
