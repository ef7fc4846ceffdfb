"""The argument of each server command, as a typed object (structured by ``wire.structure``).

Every command takes one JSON object (a lens carries it, so any LSP editor can click it); its keys
are camelCase on the wire (``runId``), snake_case here. Unknown keys are ignored (a newer client
may send more); a missing or mistyped key refuses the command with a message naming it.
"""

from __future__ import annotations

from typing import ClassVar

import attrs


@attrs.frozen
class Argument:
    """A command's argument; ``USAGE`` spells its keys for the refusal of a bad one."""

    USAGE: ClassVar[str] = "{}"


@attrs.frozen
class FunctionArgument(Argument):
    """A function of a file, on a target (default: ``trnlens.target``)."""

    USAGE: ClassVar[str] = "{uri, qualname, target?}"
    uri: str
    qualname: str
    target: str | None = None


@attrs.frozen
class MeasureFixArgument(Argument):
    USAGE: ClassVar[str] = "{uri, qualname, code?, target?}"
    uri: str
    qualname: str
    code: str | None = None
    target: str | None = None


@attrs.frozen
class HistoryArgument(Argument):
    USAGE: ClassVar[str] = "{uri, qualname}"
    uri: str
    qualname: str


@attrs.frozen
class CancelArgument(Argument):
    """That function's job, a file's jobs, or (nothing given) every job."""

    USAGE: ClassVar[str] = "{uri?, qualname?}"
    uri: str | None = None
    qualname: str | None = None


@attrs.frozen
class SelectTargetArgument(Argument):
    USAGE: ClassVar[str] = "{target?, ask?}"
    target: str | None = None
    ask: bool = True


@attrs.frozen
class ClearArgument(Argument):
    USAGE: ClassVar[str] = "{uri?}"
    uri: str | None = None


@attrs.frozen
class ExplorerArgument(Argument):
    USAGE: ClassVar[str] = "{uri?, qualname?, runId?, target?, uiPort?, apiPort?}"
    uri: str | None = None
    qualname: str | None = None
    run_id: str | None = None
    target: str | None = None
    ui_port: int | None = None
    api_port: int | None = None


@attrs.frozen
class ReportArgument(Argument):
    USAGE: ClassVar[str] = "{uri?, qualname?, runId?, show?}"
    uri: str | None = None
    qualname: str | None = None
    run_id: str | None = None
    show: bool = False
