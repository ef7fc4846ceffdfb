"""Work-done progress for one run: begin (queued or starting), a report per agent phase, end.

Server-initiated tokens (``window/workDoneProgress/create``), because the command that starts a
run answers at once while the run goes on. Clients without progress support get nothing here and
still see the lens state and the final message.

Every value also carries the run's state for machines, under ``trnlens`` (an extra property of
the LSP value, which other clients ignore; docs/lsp.md): ``state`` (``queued``, ``starting``, an
agent phase from agent/protocol.PHASES, or ``ended``), ``variant`` of ``variants``, ``step`` of
``steps`` where known, and at the end ``outcome`` (agent/protocol.OUTCOMES). The begin value
adds ``kind`` (``profile`` or ``compare``) and ``qualname``. The extension reads these, never the
English ``message``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.lsp.server import LanguageServer

from trnlens.agent.protocol import OUTCOMES, Progress
from trnlens.lsp import wire

log = logging.getLogger(__name__)
CREATE_TIMEOUT_S = 5.0
_CONVERTER = get_converter()


def warm_converter() -> None:
    """Writes the progress values' hooks before the event loop runs (see ``wire.warm``)."""
    wire.warm(
        _CONVERTER,
        unstructure=[
            types.WorkDoneProgressBegin,
            types.WorkDoneProgressReport,
            types.WorkDoneProgressEnd,
        ],
    )


def run_state(
    state: str, progress: Progress | None = None, outcome: str | None = None, **extra: Any
) -> dict[str, Any]:
    """The ``trnlens`` property of a progress value (see the module's docstring)."""
    if outcome is not None and outcome not in OUTCOMES:
        raise ValueError(f"unknown run outcome {outcome!r}: one of {', '.join(OUTCOMES)}")
    found: dict[str, Any] = {"state": state, **extra}
    if progress is not None:
        found.update(variant=progress.variant, variants=progress.variants, step=progress.step,
                     steps=progress.steps)  # fmt: skip
    if outcome is not None:
        found["outcome"] = outcome
    return found


class RunProgress:
    def __init__(self, server: LanguageServer, token: str, title: str, kind: str, qualname: str):
        self.server = server
        self.token = token
        self.title = title
        self.kind = kind  # "profile" or "compare"
        self.qualname = qualname
        self.active = False

    def _supported(self) -> bool:
        window = self.server.client_capabilities.window
        return bool(window and window.work_done_progress)

    def _send(self, value: Any, state: dict[str, Any]) -> None:
        data = _CONVERTER.unstructure(value)
        data["trnlens"] = state
        self.server.protocol.notify(types.PROGRESS, types.ProgressParams(self.token, data))

    async def begin(self, message: str, state: str) -> None:
        """``state``: ``queued`` or ``starting``."""
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
        begin = types.WorkDoneProgressBegin(title=self.title, message=message, cancellable=True)
        self._send(begin, run_state(state, kind=self.kind, qualname=self.qualname))

    def report(self, message: str, progress: Progress | None = None) -> None:
        """A report: the agent's ``progress`` (its state), or the server's own start."""
        if self.active:
            state = run_state(progress.phase if progress else "starting", progress)
            self._send(types.WorkDoneProgressReport(message=message, cancellable=True), state)

    def end(self, message: str, outcome: str) -> None:
        """``outcome``: one of agent/protocol.OUTCOMES."""
        if self.active:
            self.active = False
            state = run_state("ended", outcome=outcome)
            self._send(types.WorkDoneProgressEnd(message=message), state)
            self.server.work_done_progress.tokens.pop(self.token, None)
