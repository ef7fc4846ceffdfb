"""The line-delimited JSON protocol between the server (or CLI) and the agent.

One JSON object per line. Every message has a ``type``; messages about a request carry its ``id``.
Each message is a dataclass here (stdlib only: the agent ships alone to hosts that may lack attrs
or cattrs); :func:`format_message` writes one, :func:`parse_agent_message` and
:func:`parse_request` read one and raise :class:`ProtocolError` naming the bad field.

Server -> agent:
  ``Profile``   ``{"type": "profile", "id", "variants": [...], ...}``  run one request (runner.py)
  ``Cancel``    ``{"type": "cancel", "id"}``   stop that request as soon as possible
  ``Ping``      ``{"type": "ping", "id"}``     answered with ``pong`` (liveness)
  ``Shutdown``  ``{"type": "shutdown"}``       exit after the current request
  ``Files``     ``{"type": "files", "id", "sha256": [...]}``  the library files a run executed,
                by the digests its result gave them (libraryfiles/): a remote host's texts for
                the server's static rules; answered with ``file-contents``, even during a run

Agent -> server:
  ``Hello``          first line: ``schema_version``, ``agent_version``, ``pid``, ``python``, ...
  ``Progress``       ``id``, the state: ``phase`` (one of PHASES), ``variant`` of ``variants``,
                     ``step`` of ``steps`` (null where unknown); and ``message`` for people
  ``ResultMessage``  ``id``, ``result``: a result, or a comparison (``variants``, ``baseline``, ...)
  ``ErrorMessage``   ``id``, ``error``: ``{"kind", "type", "message", "path", "line", "traceback"}``
  ``Pong``           ``id``, ``pid``, ``busy``
  ``FileContents``   ``id``, ``files``: ``[{"sha256", "data"}]`` (``data``: the bytes, zlib then
                     base64) or ``[{"sha256", "error"}]`` (unknown digest, changed, too big)
  ``ArtifactArchive`` right after a result whose request's options named ``artifacts_back`` (a
                     run directory ``R`` whose ``R/artifacts`` the run wrote): ``id``, ``data``,
                     that directory as a tar.gz, base64, ``R`` removed; or ``error`` (the server
                     then fetches them another way). No round trip of its own (artifacts/)

A request ends in one of OUTCOMES (:func:`outcome_of`): the server forwards it, with the progress
state, to the editor (docs/lsp.md), so no reader ever classifies a run by its English words.

The server refuses an agent whose hello names another ``SCHEMA_VERSION``. The result object's
shape is documented in ``server/trnlens/schema/result.schema.json``; bump ``SCHEMA_VERSION``
when the result gains or changes fields; ``READABLE_SCHEMA_VERSIONS`` lists the stored results
this trnlens still reads (history must survive an upgrade: every newer version only adds
optional fields).
"""

from __future__ import annotations

import json
import threading
from dataclasses import MISSING, asdict, dataclass, fields
from typing import IO, Any, ClassVar

SCHEMA_VERSION = 4
# 2: optional compile (graph breaks, recompiles, compile time) and findings (measured patterns).
# 3 (issue 22): comparison speedup_method/outputs_not_comparable; line/finding time_scale.
# 3: optional frames, modules, host_syncs, eval_modules, compile.scope (issue 21); and, added by
# the server after a local run, library_findings (libraries/rules.py); variant kind 'swap' with
# its module swaps (agent/swaps.py).
# 3: optional multi-rank fields (world_size, ranks, slowest_rank, rank_spread, collectives,
#    stragglers, alignment, rank_timelines, dist_backend, nproc_per_node); error.rank.
# 4 (issues 31, 32, 34), all optional: backward parts of lines, frames, modules and library
#    findings (agent/backward/); backend "xla" and an xla section (graphs, compilations,
#    recompiles with their cause and line, transfers, CPU fallbacks and forced executions at their
#    lines, IR nodes per line), versions.torch_xla / pjrt_device; a notebook's cells; per-rank
#    collective_exposed_per_step_us, collective_bytes_per_step, collective_bandwidth_gbps, per
#    collective source, bytes_per_step, modules, buckets, per_rank exposed_per_step_us /
#    bandwidth_gbps, rank_timelines' calls with source, bytes, bucket, modules, exposed;
#    library_files[].sha256 and .bytes (a remote run's files, asked for by digest) and
#    library_copies (the server's local copy of each remote library file it read).
# 4 (issue 41), optional: memory (agent/memorypass.py): the peak by kind, its phase and line,
#    growth a step and its lines.
READABLE_SCHEMA_VERSIONS = (1, 2, 3, 4)
AGENT_VERSION = "0.1.0"

# What a run does where the request leaves a field out: defined here once, read by the agent, the
# server's settings, the CLI's flags and ProfileRequest.
RUN_DEFAULTS: dict[str, Any] = {
    "backend": "auto", "warmup": 3, "steps": 5, "repeats": 20, "mode": "auto",
}  # fmt: skip
BACKENDS = ("auto", "cpu", "cuda", "neuron", "xla")
# auto: as-written when the function is a training step (steps.py), else inference.
MODES = ("auto", "inference", "training", "as-written")

# A library file bigger than this is neither hashed for, nor sent to, nor analysed by the server
# (a generated blob, not model code): the run says so instead. A ``file-contents`` answer holds
# at most FILES_BATCH_BYTES of raw file bytes; the server asks for the rest in further requests.
LIBRARY_FILE_MAX_BYTES = 4_000_000
FILES_BATCH_BYTES = 16_000_000
# A run's artifacts bigger than this (compressed) are left for the target to fetch its own way.
ARTIFACTS_MAX_BYTES = 32_000_000

# A run's phases in order. "starting" is the server's (starting an agent, a warm daemon), before
# the agent's first progress; the agent reports the others.
PHASES = (
    "starting",
    "importing",
    "building-inputs",
    "compiling",
    "warm-up",
    "measuring",
    "timing",
    "exporting",
)

# Error kinds, mapped to CLI exit codes by the server: the agent knows what failed, the server
# decides what that means for the user.
ERROR_KINDS = ("usage", "user_code", "environment", "cancelled", "internal", "restart")
# "restart": the agent cannot run the request cleanly in this process (see reloader.py) and
# exits after saying so; the server starts a fresh agent and sends the request again.


OUTCOMES = ("succeeded", "raised", "failed", "cancelled")
# How a run ended, for whoever shows it (the editor's status bar): ``succeeded`` (a result),
# ``raised`` (a result whose user code raised: it is still a run), ``failed`` (an error answer:
# usage, environment, internal, timeout) and ``cancelled``. See :func:`outcome_of`.


class ProtocolError(ValueError):
    """A line that is not a message of this protocol; the text says which field is wrong."""


# -- agent -> server


@dataclass(frozen=True)
class Hello:
    """The agent's first line. Only ``schema_version`` is required: an agent of another version
    must still be told apart by it (the server refuses it with both numbers)."""

    schema_version: int
    agent_version: str | None = None
    pid: int | None = None
    python: str | None = None
    executable: str | None = None
    neuron_visible_cores: str | None = None
    type: ClassVar[str] = "hello"


@dataclass(frozen=True)
class Progress:
    """Where a request is: a machine-readable state plus ``message``, the words for people.

    ``phase`` is one of PHASES; ``variant`` the variant's index among ``variants``; ``step`` of
    ``steps`` the pass's step when the agent knows it (None otherwise). Readers take the state
    from these fields, never from ``message``."""

    id: str | None
    phase: str
    variant: int = 0
    message: str = ""
    variants: int = 1
    step: int | None = None
    steps: int | None = None
    type: ClassVar[str] = "progress"

    def words(self) -> str:
        """The phase, then the agent's words about it, the phase said once: ``warm-up 2 of
        3`` (step words may start with their phase: "warm-up warm-up 2 of 3" otherwise). What
        the CLI prints and the editor's progress shows."""
        if not self.message:
            return self.phase
        if self.message.split(" ", 1)[0] == self.phase:
            return self.message
        return f"{self.phase} {self.message}"


@dataclass(frozen=True)
class ResultMessage:
    """A request's answer: one result, or a comparison (``variants``, ``baseline``, ...)."""

    id: str | None
    result: dict[str, Any]
    type: ClassVar[str] = "result"


@dataclass(frozen=True)
class ErrorMessage:
    """A request failed: ``error`` is ``{"kind", "type", "message", "path", "line", ...}``."""

    id: str | None
    error: dict[str, Any]
    type: ClassVar[str] = "error"

    @property
    def kind(self) -> str:
        return str(self.error.get("kind", "internal"))


@dataclass(frozen=True)
class Pong:
    id: str | None
    pid: int
    busy: str | None = None
    type: ClassVar[str] = "pong"


@dataclass(frozen=True)
class FileContents:
    """The answer to ``files``: each asked digest with its file's bytes (zlib, then base64, in
    ``data``) or an ``error`` saying why not."""

    id: str | None
    files: list[dict[str, Any]]
    type: ClassVar[str] = "file-contents"


@dataclass(frozen=True)
class ArtifactArchive:
    """A run's artifacts as a tar.gz (base64), or why not; sent unasked after its result."""

    id: str | None
    data: str | None = None
    error: str | None = None
    type: ClassVar[str] = "artifact-archive"


AgentMessage = (
    Hello | Progress | ResultMessage | ErrorMessage | Pong | FileContents | ArtifactArchive
)


# -- server -> agent


@dataclass(frozen=True)
class Profile:
    """Run one request; ``fields`` are its settings and variants (runner.py validates them)."""

    id: str | None
    fields: dict[str, Any]
    type: ClassVar[str] = "profile"


@dataclass(frozen=True)
class Cancel:
    id: str | None = None  # None: whatever runs
    type: ClassVar[str] = "cancel"


@dataclass(frozen=True)
class Ping:
    id: str | None = None
    type: ClassVar[str] = "ping"


@dataclass(frozen=True)
class Shutdown:
    type: ClassVar[str] = "shutdown"


@dataclass(frozen=True)
class Files:
    """The bytes of library files, named by the sha256 a run's ``library_files`` gave them."""

    id: str | None
    sha256: list[str]
    type: ClassVar[str] = "files"


Request = Profile | Cancel | Ping | Shutdown | Files
_AGENT_MESSAGES: dict[str, type] = {
    c.type: c
    for c in (Hello, Progress, ResultMessage, ErrorMessage, Pong, FileContents, ArtifactArchive)
}
_REQUESTS: dict[str, type] = {c.type: c for c in (Cancel, Ping, Shutdown, Files)}


def outcome_of(message: ResultMessage | ErrorMessage) -> str:
    """The terminal outcome (one of OUTCOMES) of a request's answer."""
    if isinstance(message, ErrorMessage):
        return "cancelled" if message.kind == "cancelled" else "failed"
    runs = message.result.get("variants") or [message.result]
    return "raised" if any(run.get("error") for run in runs) else "succeeded"


def to_json(message: AgentMessage | Request) -> dict[str, Any]:
    """The message as the JSON object on the wire (``type`` first)."""
    if isinstance(message, Profile):
        return {"type": "profile", **message.fields, "id": message.id}
    return {"type": message.type, **asdict(message)}


def format_message(message: AgentMessage | Request) -> str:
    """One protocol line (without the newline)."""
    return json.dumps(to_json(message), separators=(",", ":"), default=_json_default)


def parse_agent_message(line: str | bytes) -> AgentMessage:
    """An agent's line as its message; ProtocolError names what is wrong with it."""
    obj = _object(line)
    cls = _AGENT_MESSAGES.get(obj["type"])
    if cls is None:
        raise ProtocolError(f"unknown agent message type {obj['type']!r}")
    return _build(cls, obj)


def parse_request(line: str | bytes) -> Request:
    """A server's line as its request; ProtocolError names what is wrong with it."""
    obj = _object(line)
    if obj["type"] == "profile":
        if "id" in obj and not isinstance(obj["id"], (str, type(None))):
            raise ProtocolError(f"profile: id must be a string or null, got {obj['id']!r}")
        fields = {k: v for k, v in obj.items() if k not in ("type", "id")}
        return Profile(id=obj.get("id"), fields=fields)
    cls = _REQUESTS.get(obj["type"])
    if cls is None:
        raise ProtocolError(f"unknown message type {obj['type']!r}")
    return _build(cls, obj)


def progress_from_json(obj: dict[str, Any]) -> Progress:
    """A progress message from its JSON object (the warm daemon and rank files relay them)."""
    return _build(Progress, {**obj, "type": "progress"})


def _object(line: str | bytes) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError("a protocol message must be a JSON object with a string 'type'")
    return obj


_JSON_CHECKS: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "str": (str,),
    "dict[str, Any]": (dict,),
    "str | None": (str, type(None)),
    "int | None": (int, type(None)),
    "list[str]": (list,),
    "list[dict[str, Any]]": (list,),
}
# What each element of a list field must be.
_ITEM_CHECKS: dict[str, type] = {"list[str]": str, "list[dict[str, Any]]": dict}


def _build(cls: type, obj: dict[str, Any]) -> Any:
    """``cls`` from ``obj``: every field without a default present, each of its declared JSON
    type (a bool is not an int); unknown keys are left out (a newer peer may add optional
    ones). Progress phases must be PHASES."""
    what = obj.get("type")
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in obj:
            if f.default is MISSING:
                raise ProtocolError(f"{what}: missing field {f.name!r}")
            continue
        value = obj[f.name]
        allowed = _JSON_CHECKS.get(str(f.type), (object,))
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise ProtocolError(f"{what}: {f.name} is {value!r}, expected {f.type}")
        item = _ITEM_CHECKS.get(str(f.type))
        if (
            item is not None
            and isinstance(value, list)
            and not all(isinstance(v, item) for v in value)
        ):
            raise ProtocolError(f"{what}: every item of {f.name} must be a {item.__name__}")
        values[f.name] = value
    if cls is Progress and values["phase"] not in PHASES:
        raise ProtocolError(f"progress: unknown phase {values['phase']!r}")
    return cls(**values)


class Channel:
    """Writes protocol messages to a private stream; safe to use from several threads."""

    def __init__(self, stream: IO[str]):
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: AgentMessage) -> None:
        line = format_message(message)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def _json_default(value: Any) -> Any:
    # Shapes, dtypes and devices end up in descriptions; never let one of them kill a result.
    return str(value)
