"""How the language server refuses: :class:`CommandError`, and each feature's failure kept to it.

A leaf module (no other lsp module), so that every feature can refuse or guard without importing
the commands or the server.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from pygls.exceptions import JsonRpcException

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


class CommandError(JsonRpcException):
    """A refused command. A JsonRpcException, so that pygls answers with this message as it is
    (any other exception's message starts with its class name, which no user should read).
    ``data.severity``: "warning" for what the user can fix (the default), "error" for a run that
    broke."""

    CODE = -32000  # JSON-RPC's implementation-defined server error range: "refused, see message"

    def __init__(self, message: str, severity: str = "warning"):
        super().__init__(message, self.CODE, {"severity": severity})


class _RefusalsAreNotCrashes(logging.Filter):
    """pygls logs every error response with a traceback; a refusal is an answer, not a crash:
    logged in one line at INFO instead (the client shows the message to the user)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, CommandError):
            record.exc_info = None
            record.msg, record.args = "refused: %s", (error.message,)
            record.levelno, record.levelname = logging.INFO, "INFO"
            # the record was made at ERROR: the configured level (`serve --log-level`) decides
            return logging.getLogger().isEnabledFor(logging.INFO)
        return True


logging.getLogger("pygls.protocol.json_rpc").addFilter(_RefusalsAreNotCrashes())


def guarded(default: Any) -> Callable[[F], F]:
    """Logs a feature's failure and answers ``default``: the other features keep working."""

    def wrap(handler: F) -> F:
        if inspect.iscoroutinefunction(handler):

            @functools.wraps(handler)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await handler(*args, **kwargs)
                except Exception:
                    log.exception("%s failed", handler.__name__)
                    return default

            return guarded_async  # type: ignore[return-value]  # same signature, wraps keeps it

        @functools.wraps(handler)
        def guarded_sync(*args: Any, **kwargs: Any) -> Any:
            try:
                return handler(*args, **kwargs)
            except Exception:
                log.exception("%s failed", handler.__name__)
                return default

        return guarded_sync  # type: ignore[return-value]  # same signature, wraps keeps it

    return wrap
