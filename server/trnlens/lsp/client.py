"""The :class:`~trnlens.lsp.context.Client` over a pygls connection: what features tell the editor.

Each request asks only what the client declared it supports (refresh, show document, message
buttons, configuration), so features need not read capabilities themselves.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from trnlens.lsp.progress import RunProgress

log = logging.getLogger(__name__)


class LspClient:
    def __init__(self, server: LanguageServer) -> None:
        self._server = server

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self._server.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def show_document(self, uri: str) -> None:
        window = self._server.client_capabilities.window
        if window and window.show_document and window.show_document.support:
            self._server.window_show_document(types.ShowDocumentParams(uri=uri, external=True))

    def publish_diagnostics(self, uri: str, diagnostics: list[types.Diagnostic]) -> None:
        self._server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics)
        )

    def notify(self, method: str, params: object) -> None:
        self._server.protocol.notify(method, params)

    def refresh_lenses(self) -> None:
        workspace = self._server.client_capabilities.workspace
        if workspace and workspace.code_lens and workspace.code_lens.refresh_support:
            self._server.workspace_code_lens_refresh(None)

    def refresh_hints(self) -> None:
        workspace = self._server.client_capabilities.workspace
        if workspace and workspace.inlay_hint and workspace.inlay_hint.refresh_support:
            self._server.workspace_inlay_hint_refresh(None)

    def progress(self, token: str, title: str, kind: str, qualname: str) -> RunProgress:
        return RunProgress(self._server, token, title, kind, qualname)

    def can_ask(self) -> bool:
        window = self._server.client_capabilities.window
        return bool(window and window.show_message)

    async def ask(self, message: str, titles: list[str]) -> str | None:
        answer = await self._server.window_show_message_request_async(
            types.ShowMessageRequestParams(
                type=types.MessageType.Info,
                message=message,
                actions=[types.MessageActionItem(title=title) for title in titles],
            )
        )
        return answer.title if answer else None

    async def fetch_configuration(self) -> list[object] | None:
        workspace = self._server.client_capabilities.workspace
        if not (workspace and workspace.configuration):
            return None
        try:
            values = await self._server.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="trnlens")])
            )
        except Exception as exc:
            log.warning("workspace/configuration failed: %s", exc)
            return None
        return list(values or [])

    def markdown(self) -> bool:
        general = self._server.client_capabilities.general
        return bool(general and general.markdown)

    def workspace_root(self) -> Path | None:
        root = self._server.workspace.root_path
        return Path(root) if root else None

    def document_text(self, uri: str) -> str:
        return self._server.workspace.get_text_document(uri).source

    def notebook_cells(self, uri: str) -> list[tuple[str, bool, str, str]] | None:
        workspace = self._server.workspace
        notebook = workspace.get_notebook_document(notebook_uri=uri)
        if notebook is None:
            return None
        found = []
        for cell in notebook.cells:
            document = workspace.get_text_document(cell.document)
            is_code = cell.kind == types.NotebookCellKind.Code
            found.append((cell.document, is_code, document.language_id or "", document.source))
        return found

    def workspace_folders(self) -> list[Path]:
        found = []
        for folder in self._server.workspace.folders.values():
            path = to_fs_path(folder.uri)
            if path:
                found.append(Path(path))
        return found
