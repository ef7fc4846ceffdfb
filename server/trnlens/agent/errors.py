"""Errors the agent reports, each with a ``kind`` the server maps to an exit code.

A failure in the user's code is reported at the innermost frame that belongs to the project, so
the editor can put the diagnostic on the line that raised, not inside torch.
"""

from __future__ import annotations

import os
import traceback as tb
from typing import Any

from . import outofmemory


class AgentError(Exception):
    def __init__(
        self,
        kind: str,
        message: str,
        *,
        type_: str | None = None,
        path: str | None = None,
        line: int | None = None,
        traceback: str | None = None,
    ):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.type = type_ or kind
        self.path = path
        self.line = line
        self.traceback = traceback
        self.out_of_memory: dict[str, Any] | None = None  # outofmemory.read's figures

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "kind": self.kind,
            "type": self.type,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "traceback": self.traceback,
        }
        if self.out_of_memory is not None:
            found["out_of_memory"] = self.out_of_memory
        return found


def usage(message: str, **where: Any) -> AgentError:
    return AgentError("usage", message, **where)


def environment(message: str) -> AgentError:
    return AgentError("environment", message)


def from_user_code(
    exc: BaseException, is_project_file, relpath, modules: dict[int, str] | None = None
) -> AgentError:
    """Maps an exception raised by user code to its innermost project frame; an out-of-memory
    failure is said as one (outofmemory.py; ``modules``: the step's modules' names by id)."""
    frames = tb.extract_tb(exc.__traceback__)
    path = line = None
    for frame in reversed(frames):
        if is_project_file(frame.filename):
            path, line = relpath(frame.filename), frame.lineno
            break
    text = "".join(tb.format_exception(type(exc), exc, exc.__traceback__))
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SystemExit):
        message = f"the code called sys.exit({exc.code!r}): a profiled function must return"
    found = outofmemory.read(exc, modules or {}) if isinstance(exc, Exception) else None
    if found is not None:
        message = f"{outofmemory.words(found)} ({type(exc).__name__})"
    failure = AgentError(
        "user_code", message, type_=type(exc).__name__, path=path, line=line, traceback=text
    )
    failure.out_of_memory = found
    return failure


def relative_to(root: str, path: str) -> str:
    try:
        rel = os.path.relpath(path, root)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel.replace(os.sep, "/")
