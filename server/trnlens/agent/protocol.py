"""The line-delimited JSON protocol between the server (or CLI) and the agent.

One JSON object per line. Every message has a ``type``; messages about a request carry its ``id``.

Server -> agent:
  ``{"type": "profile", "id", "variants": [...], ...}``  run one request (see ``runner.Request``)
  ``{"type": "cancel", "id"}``                            stop that request as soon as possible
  ``{"type": "ping", "id"}``                              answered with ``pong`` (liveness)
  ``{"type": "shutdown"}``                                exit after the current request

Agent -> server:
  ``hello``     first line: ``schema_version``, ``agent_version``, ``pid``, ``python``
  ``progress``  ``id``, ``phase`` (one of PHASES), ``variant`` (index), ``message``
  ``result``    ``id``, ``result``: a result, or a comparison (``variants``, ``baseline``, ...)
  ``error``     ``id``, ``error``: ``{"kind", "type", "message", "path", "line", "traceback"}``
  ``pong``      ``id``, ``versions``

The result object's shape is documented in ``server/trnlens/schema/result.schema.json``; bump
``SCHEMA_VERSION`` when the result gains or changes fields (the server refuses agents speaking
another version); ``READABLE_SCHEMA_VERSIONS`` lists the stored results this trnlens still reads
(history must survive an upgrade: every newer version only adds optional fields).
"""

from __future__ import annotations

import json
import threading
from typing import IO, Any

SCHEMA_VERSION = 3
# 2: optional compile (graph breaks, recompiles, compile time) and findings (measured patterns).
# 3 (issue 22): comparison speedup_method/outputs_not_comparable; line/finding time_scale.
# 3: optional frames, modules, host_syncs, eval_modules, compile.scope (issue 21); and, added by
# the server after a local run, library_findings (libraries/rules.py); variant kind 'swap' with
# its module swaps (agent/swaps.py).
# 3: optional multi-rank fields (world_size, ranks, slowest_rank, rank_spread, collectives,
#    stragglers, alignment, rank_timelines, dist_backend, nproc_per_node); error.rank.
READABLE_SCHEMA_VERSIONS = (1, 2, 3)
AGENT_VERSION = "0.1.0"

# What a run does where the request leaves a field out: defined here once, read by the agent, the
# server's settings, the CLI's flags and ProfileRequest.
RUN_DEFAULTS = {"backend": "auto", "warmup": 3, "steps": 5, "repeats": 20, "mode": "auto"}
BACKENDS = ("auto", "cpu", "cuda", "neuron")
# auto: as-written when the function is a training step (steps.py), else inference.
MODES = ("auto", "inference", "training", "as-written")

PHASES = (
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


class Channel:
    """Writes protocol messages to a private stream; safe to use from several threads."""

    def __init__(self, stream: IO[str]):
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":"), default=_json_default)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def _json_default(value: Any) -> Any:
    # Shapes, dtypes and devices end up in descriptions; never let one of them kill a result.
    return str(value)


def parse_line(line: str) -> dict[str, Any]:
    message = json.loads(line)
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ValueError("a protocol message must be a JSON object with a string 'type'")
    return message
