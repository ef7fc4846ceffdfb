"""Handlers of the connection's life and of document sync: initialize, configuration, open,
change, close, progress cancel, shutdown. Module-level functions of the services and the
method's params; ``server.py`` registers them."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

from lsprotocol import types

from trnlens.lsp.context import Context
from trnlens.lsp.documents import ProfiledDocument
from trnlens.lsp.errors import guarded
from trnlens.lsp.services import Services


def initialize(app: Services, params: types.InitializeParams) -> None:
    app.ctx.config.set_initialization_options(params.initialization_options)


async def initialized(app: Services, params: types.InitializedParams) -> None:
    await app.ctx.fetch_configuration()
    app.ctx.refresh_all()
    app.watching.start(asyncio.get_running_loop())


async def did_change_configuration(
    app: Services, params: types.DidChangeConfigurationParams
) -> None:
    settings = params.settings
    if isinstance(settings, dict) and settings.get("trnlens") is not None:
        app.ctx.config.set_client_configuration(settings["trnlens"])
    else:  # a "pull" client: the notification only says that something changed
        await app.ctx.fetch_configuration()
    app.ctx.refresh_all()


@guarded(None)
async def did_open(app: Services, params: types.DidOpenTextDocumentParams) -> None:
    """The document is open at once (edits apply to it); its parse and static analysis are
    made in a worker thread (seconds for a big file), and requests on it wait for them."""
    doc = app.ctx.add_document(params.text_document.uri, params.text_document.text)
    if doc is not None:
        await prepare_and_publish(app, doc)


async def prepare_and_publish(
    app: Services, doc: ProfiledDocument, first: Callable[[], Awaitable[None]] | None = None
) -> None:
    """A document just added: parsed and analysed off the loop, its stored runs placed, its
    diagnostics published (a file's or a notebook's: lsp/notebooks.py). ``first``: what else
    the open waits for (a notebook's file read); requests on the document wait for it too,
    else one asked meanwhile is answered without the document's runs."""
    ctx = app.ctx
    ready = ctx.opening(doc.uri)
    try:
        if first is not None:
            await first()
            if ctx.documents.get(doc.uri) is not doc:
                return  # closed (or reopened) meanwhile
        settings = ctx.settings_for(doc.root)
        prepare = app.analysis.prepare
        prepared = await asyncio.to_thread(prepare, doc.text, doc.relpath, settings)
        if ctx.documents.get(doc.uri) is not doc:
            return  # closed (or reopened) meanwhile
        app.analysis.adopt(doc, prepared)
        await ctx.reparsed(doc, ready)  # edited meanwhile: its re-parse, off the loop too
        if ctx.documents.get(doc.uri) is not doc:
            return
        ctx.load_stored(doc)
    finally:
        ctx.opened(doc.uri, ready)
    ctx.report_settings_problems()
    app.watching.watch(doc.root)
    ctx.publish(doc.uri)


RUN_SHOWN = "trnlens/runShown"  # extension/src/runstate.ts


@guarded(None)
def did_change(app: Services, params: types.DidChangeTextDocumentParams) -> None:
    ctx = app.ctx
    doc = ctx.documents.get(params.text_document.uri)
    if doc is None:
        return
    # the text after the change, as the connection's workspace applied it
    doc.update(ctx.client.document_text(doc.uri), list(params.content_changes))
    after_edit(app, doc)


def after_edit(app: Services, doc: ProfiledDocument) -> None:
    """What an edit (of a file, or of a notebook's cells) changes: its re-parse off the loop
    (requests wait for it), then what the edit changed, told to the client."""
    app.analysis.edited(doc.uri)
    app.ctx.reparse(doc, functools.partial(_edited, app.ctx))


def _edited(ctx: Context, doc: ProfiledDocument) -> None:
    """Once the edited text is parsed: what the edit changed, told to the client."""
    restored = doc.restore_matching()
    if restored:  # an Undo: the run that measured this text is shown again
        for placement in restored:  # the status bar stops saying "failed" for a good run
            result = placement.result
            ctx.client.notify(
                RUN_SHOWN,
                {"uri": doc.uri, "qualname": result.qualname, "runId": result.run_id,
                 "failed": bool(result.error)},
            )  # fmt: skip
        ctx.refresh_lenses()
        ctx.refresh_hints()
        ctx.publish(doc.uri, force=True)
    else:
        ctx.publish(doc.uri)


@guarded(None)
def did_close(app: Services, params: types.DidCloseTextDocumentParams) -> None:
    close(app, params.text_document.uri)


def close(app: Services, uri: str) -> None:
    if app.ctx.close_document(uri):
        app.analysis.forget(uri)
        app.lenses.forget(uri)


async def progress_cancel(app: Services, params: types.WorkDoneProgressCancelParams) -> None:
    await app.runs.cancel_token(str(params.token))


async def shutdown(app: Services, params: None) -> None:
    app.watching.stop()
    app.analysis.close()
    await app.tunnels.close()  # before the ssh masters they may ride on
    await app.runs.close()
    app.ctx.close_stores()
