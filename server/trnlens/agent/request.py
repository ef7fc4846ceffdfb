"""A profile request's fields, checked before torch is even imported (usage errors answer fast).

The server sends the fields in a ``profile`` message (protocol.py); what it leaves out takes
RUN_DEFAULTS.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .measure import Settings
from .protocol import MODES, RUN_DEFAULTS


@dataclass
class RunRequest:
    variants: list[dict]
    settings: Settings
    mode: str
    backend: str
    root: str  # absolute
    files: dict[str, str] = field(default_factory=dict)  # unsaved buffers, absolute path -> text
    sources: dict[str, str] = field(default_factory=dict)  # files shipped with a remote request
    artifacts_dir: str = ""
    out_dir: str | None = None  # a rank of a multi-rank run writes where its coordinator says
    options: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)  # target name, git commit
    inputs: str | None = None  # the inputs factory the user named, over the directive


def parse(fields: dict[str, Any]) -> RunRequest:
    """The request's fields as a RunRequest; a usage error names what is wrong."""
    r = {**RUN_DEFAULTS, **{k: v for k, v in fields.items() if v is not None}}
    mode = r["mode"]
    if mode not in MODES:
        raise errors.usage(f"unknown mode {mode!r}: choose auto, inference, training or as-written")
    for key in ("warmup", "steps", "repeats"):
        if not isinstance(r[key], int) or r[key] < (1 if key != "warmup" else 0):
            raise errors.usage(f"{key} must be a positive integer, got {r[key]!r}")
    options = dict(r.get("options") or {})
    settings = Settings(
        warmup=r["warmup"],
        steps=r["steps"],
        repeats=r["repeats"],
        timing_budget_s=float(options.get("timing_budget_s", 3.0)),
        lines=bool(options.get("lines", True)),
        trace=bool(options.get("trace", True)),
        timing=bool(options.get("timing", True)),
        settle_steps=int(options.get("settle_steps", Settings.settle_steps)),
        attribution=str(options.get("attribution", Settings.attribution)),
        collectives=bool(options.get("collectives", True)),
        memory=bool(options.get("memory", Settings.memory)),
        attribution_limit=_limit(options.get("attribution_limit", Settings.attribution_limit)),
        backward=bool(options.get("backward", Settings.backward)),
    )
    if settings.attribution not in ("full", "lines"):
        raise errors.usage(f"unknown attribution {settings.attribution!r}: choose full or lines")
    variants = r.get("variants") or []
    if not variants:
        raise errors.usage("the request names no variants")
    root = os.path.abspath(r.get("project_root") or os.getcwd())
    if r.get("device"):
        options["device"] = r["device"]
    return RunRequest(
        variants=list(variants),
        settings=settings,
        mode=mode,
        backend=r["backend"],
        root=root,
        files={
            os.path.abspath(os.path.join(root, p)): t for p, t in (r.get("files") or {}).items()
        },
        sources=dict(r.get("sources") or {}),
        artifacts_dir=r.get("artifacts_dir") or os.path.join(root, ".trnlens", "staging"),
        out_dir=r.get("out_dir"),
        options=options,
        context=dict(r.get("context") or {}),
        inputs=r.get("inputs"),
    )


def _limit(value: Any) -> int:
    """The attribution's row limit: a positive integer, or "all"."""
    if value == "all":
        return 1_000_000
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise errors.usage(f"attribution_limit must be a positive integer or 'all', got {value!r}")
    return value
