"""Work-done progress for one run: begin (queued or starting), a report per agent phase, end.

Server-initiated tokens (``window/workDoneProgress/create``), because the command that starts a
run answers at once while the run goes on. Clients without progress support get nothing here and
still see the lens state and the final message.
"""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types
from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)
CREATE_TIMEOUT_S = 5.0


class RunProgress:
    def __init__(self, server: LanguageServer, token: str, title: str):
        self.server = server
        self.token = token
        self.title = title
        self.active = False

    def _supported(self) -> bool:
        window = self.server.client_capabilities.window
        return bool(window and window.work_done_progress)

    async def begin(self, message: str) -> None:
        if not self._supported():
            return
        try:
            # A client that never answers must not hold the run back.
            await asyncio.wait_for(
                self.server.work_done_progress.create_async(self.token), CREATE_TIMEOUT_S
            )
        except Exception as exc:  # refused or unanswered: run without a progress bar
            log.warning("progress not created: %s", exc)
            return
        self.active = True
        self.server.work_done_progress.begin(
            self.token,
            types.WorkDoneProgressBegin(title=self.title, message=message, cancellable=True),
        )

    def report(self, message: str) -> None:
        if self.active:
            self.server.work_done_progress.report(
                self.token, types.WorkDoneProgressReport(message=message, cancellable=True)
            )

    def end(self, message: str) -> None:
        if self.active:
            self.active = False
            self.server.work_done_progress.end(
                self.token, types.WorkDoneProgressEnd(message=message)
            )
            self.server.work_done_progress.tokens.pop(self.token, None)
