"""What a target is: where the agent runs and how a run's files get there and back.

A target answers, for :mod:`trnlens.jobs`:
- ``command()`` / ``environment()``: how to start the agent (after ``await prepare()``);
- ``await stage(payload, store)``: make the run's inputs reachable from the agent and return the
  payload as the agent must see it (paths on the target);
- ``await collect(staged, outcome, store, fetch)``: bring the run's artifacts into the local
  store's staging directory and map target paths in the outcome back to local ones; ``fetch``
  (the agent's own connection: run dir -> tar.gz bytes, or None) is tried first;
- ``await discard(staged)``: remove what the run left on the target;
- ``await kill(agent_pid_token)``: stop the agent's whole process group on the target.
The local target does nothing in most of these: the agent already sees the project and writes
straight into the store's staging directory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

REDACTED = "***"


class TargetError(Exception):
    """A target problem with a message fit for the user (becomes an 'environment' error)."""


@dataclass
class Staged:
    payload: dict  # the request as the agent sees it
    run_dir: str | None = None  # a per-run directory on the target, removed by discard()
    extras: dict = field(default_factory=dict)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (a target's env values, ssh option values) replaced: messages
    quote ssh's and the agent's stderr, which may echo them, and messages reach logs, results
    and the editor."""
    for secret in sorted({s for s in secrets if len(s) >= 3}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
