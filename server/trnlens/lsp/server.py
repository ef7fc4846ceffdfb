"""The pygls server: it only wires. LSP methods and commands go to module-level handlers
(``lifecycle``, ``handlers``, ``commands``), each called with the connection's
:class:`~trnlens.lsp.services.Services` and its typed params.

Handlers stay thin and never block: anything long (a profile) runs as an asyncio task (see
``runs``), so lenses, hints and hovers are answered while a run goes. Each feature's errors are
logged on their own and answered with an empty result, so one failing feature never takes the
others down.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
from lsprotocol import types
from pygls.lsp.server import LanguageServer

from trnlens import __version__, results
from trnlens.lsp import (
    actions,
    commands,
    handlers,
    lifecycle,
    notebooks,
    progress,
    services,
    wire,
)
from trnlens.lsp.client import LspClient
from trnlens.lsp.errors import CommandError


class TrnlensServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "trnlens",
            __version__,
            notebook_document_sync=notebooks.SYNC_OPTIONS,
            converter_factory=wire.shared_converter,
        )
        self.services = services.build(LspClient(self))


class _LateCancels(logging.Filter):
    """Drops pygls's warning for a ``$/cancelRequest`` of a request already answered: editors
    cancel hovers and lenses they no longer need as a matter of course, and the race (the
    answer crossing the cancel) is no problem, so the Output channel is no place for it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Cancel notification for unknown message id")


def create_server() -> TrnlensServer:
    _warm_up()
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_LateCancels())
    server = TrnlensServer()
    app = server.services

    def on(method: str, handler: Callable[..., Any], options: Any = None) -> None:
        server.feature(method, options)(_bind(handler, app))

    on(types.INITIALIZE, lifecycle.initialize)
    on(types.INITIALIZED, lifecycle.initialized)
    on(types.WORKSPACE_DID_CHANGE_CONFIGURATION, lifecycle.did_change_configuration)
    on(types.TEXT_DOCUMENT_DID_OPEN, lifecycle.did_open)
    on(types.TEXT_DOCUMENT_DID_CHANGE, lifecycle.did_change)
    on(types.TEXT_DOCUMENT_DID_CLOSE, lifecycle.did_close)
    on(types.WINDOW_WORK_DONE_PROGRESS_CANCEL, lifecycle.progress_cancel)
    on(types.SHUTDOWN, lifecycle.shutdown)
    on(types.NOTEBOOK_DOCUMENT_DID_OPEN, notebooks.did_open)
    on(types.NOTEBOOK_DOCUMENT_DID_CHANGE, notebooks.did_change)
    on(types.NOTEBOOK_DOCUMENT_DID_CLOSE, notebooks.did_close)
    # Requests on a notebook's cell are answered as the notebook's (lsp/notebooks.py).
    cell = notebooks.in_cells
    on(types.TEXT_DOCUMENT_CODE_LENS, cell(handlers.code_lens))
    on(types.CODE_LENS_RESOLVE, handlers.code_lens_resolve)
    kinds = types.CodeActionOptions(code_action_kinds=actions.KINDS, resolve_provider=False)
    on(types.TEXT_DOCUMENT_CODE_ACTION, cell(handlers.code_action), kinds)
    on(types.TEXT_DOCUMENT_INLAY_HINT, cell(handlers.inlay_hint))
    on(types.TEXT_DOCUMENT_HOVER, cell(handlers.hover))
    for name, command in commands.HANDLERS.items():
        server.command(name)(_command(name, command, app))
    _warm_converters(server)
    return server


def _warm_up() -> None:
    """Loads now, before the event loop runs, what the first requests would otherwise load on
    it: the result schema (a file read, on the first stored run placed) and the UTF-16 codec
    (a module import, on the first range measured). On a machine that sat idle each is a wait
    for the disk (the tests' loop guard reports a first import on the loop)."""
    results.schema()
    "".encode("utf-16-le")


# What the server sends the client, besides its answers: its converter unstructures these
# messages, and structures the client's answers to the requests among them.
_OUTGOING = (
    types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
    types.WORKSPACE_CODE_LENS_REFRESH,
    types.WORKSPACE_INLAY_HINT_REFRESH,
    types.WINDOW_SHOW_MESSAGE,
    types.WINDOW_SHOW_MESSAGE_REQUEST,
    types.WINDOW_SHOW_DOCUMENT,
    types.WINDOW_LOG_MESSAGE,
    types.WINDOW_WORK_DONE_PROGRESS_CREATE,
    types.PROGRESS,
)


def _warm_converters(server: LanguageServer) -> None:
    """cattrs writes the code that converts a message type the first time one is converted:
    for ``initialize`` that is the whole ClientCapabilities tree (85 classes), 50-60 ms of CPU,
    and the first code action answered, 70-80 ms on CI's machine; on the event loop, where the
    tests' loop guard caught both. Written now, before the loop runs, for every method the
    server answers and every message it sends (about 0.2 s of CPU at start-up instead, on
    this 2-core machine; 0.06 s before, for ``initialize`` alone)."""
    answered = [*server.protocol.fm.features, types.WORKSPACE_EXECUTE_COMMAND]
    message, answer = 0, 1
    wire.warm(
        server.protocol._converter,
        structure=[types.METHOD_TO_TYPES[m][message] for m in answered]
        + [types.METHOD_TO_TYPES[m][answer] for m in _OUTGOING],
        unstructure=[types.METHOD_TO_TYPES[m][answer] for m in answered]
        + [types.METHOD_TO_TYPES[m][message] for m in _OUTGOING]
        + [wire.JsonLenses]
        + notebooks.CELL_PARAMS,  # moved to and from a cell's lines as JSON
    )
    progress.warm_converter()


def _bind(handler: Callable[..., Any], app: services.Services) -> Callable[..., Any]:
    """``handler(app, params)`` as pygls calls a feature: with the params only."""
    if inspect.iscoroutinefunction(handler):

        async def call_async(params: Any) -> Any:
            return await handler(app, params)

        call_async.__name__ = handler.__name__
        return call_async

    def call(params: Any) -> Any:
        return handler(app, params)

    call.__name__ = handler.__name__
    return call


def _command(
    name: str, command: commands.Command, app: services.Services
) -> Callable[..., Awaitable[Any]]:
    """pygls passes a command's raw JSON arguments (``*args``: no annotation to structure by);
    the one object argument is structured here, so that a bad one is refused in words."""

    async def run(*args: Any) -> Any:
        try:
            argument = wire.structure_argument(args, command.argument)
        except wire.BadArgument as exc:
            raise CommandError(f"{name} takes {command.argument.USAGE}: {exc}") from None
        # A command run from a notebook's cell (the palette, the editor's title) names the
        # cell's uri: the runs, the report and the results are the notebook's.
        notebook = app.ctx.cells.get(getattr(argument, "uri", None) or "")
        if notebook is not None:
            argument = attrs.evolve(argument, uri=notebook)  # type: ignore[call-arg]
        return await command.handler(app, argument)

    run.__name__ = command.handler.__name__
    return run
