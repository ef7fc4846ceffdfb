"""The result model: what one run measured, as the server reads it.

The JSON Schema in ``schema/result.schema.json`` is the contract with the agent (which writes plain
dicts and cannot import this module); ``SCHEMA_VERSION`` comes from the agent's protocol module so
there is one number to bump. This module gives the server typed, checked access to a result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from trnlens.agent.protocol import READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION

REQUIRED = (
    "schema_version", "run_id", "created_at", "function", "target", "backend", "device",
    "time_basis", "mode", "dispatches_per_step", "device_time_per_step_us", "ops", "lines",
    "warnings", "error",
)  # fmt: skip


class SchemaMismatch(ValueError):
    pass


def schema() -> dict:
    text = resources.files("trnlens").joinpath("schema/result.schema.json").read_text("utf-8")
    return json.loads(text)


def check(obj: Any) -> dict:
    """Returns ``obj`` when it is a result of a schema version we read, else raises SchemaMismatch.

    Older versions stay readable (stored history must survive an upgrade): each version since 1
    only added optional fields.
    """
    if not isinstance(obj, dict):
        raise SchemaMismatch(f"a result must be a JSON object, got {type(obj).__name__}")
    version = obj.get("schema_version")
    if version not in READABLE_SCHEMA_VERSIONS:
        raise SchemaMismatch(
            f"result schema_version {version!r}, this trnlens reads {SCHEMA_VERSION} "
            f"(and older: {', '.join(map(str, READABLE_SCHEMA_VERSIONS))}): "
            "upgrade the older side"
        )
    if "variants" in obj:
        for variant in obj["variants"]:
            check(variant)
        return obj
    missing = [key for key in REQUIRED if key not in obj]
    if missing:
        raise SchemaMismatch(f"result lacks {', '.join(missing)}")
    return obj


@dataclass(frozen=True)
class Result:
    """A typed view of one result dict (the dict stays the source of truth)."""

    data: dict

    @classmethod
    def parse(cls, obj: Any) -> Result:
        return cls(check(obj))

    @property
    def run_id(self) -> str:
        return self.data["run_id"]

    @property
    def path(self) -> str:
        return self.data["function"]["path"]

    @property
    def qualname(self) -> str:
        return self.data["function"]["qualname"]

    @property
    def identity(self) -> str:
        return f"{self.path}::{self.qualname}"

    @property
    def error(self) -> dict | None:
        return self.data.get("error")

    @property
    def time_basis(self) -> str:
        return self.data["time_basis"]

    @property
    def device_label(self) -> str:
        """What to call device time in any label: never 'device' when the CPU measured it."""
        return "CPU (ops)" if self.time_basis == "cpu" else self.data["backend"].upper()

    @property
    def part_label(self) -> str:
        """What a line's, module's or finding's time is (agent/basis.py): the device label, or,
        when they were put on the unprofiled median, 'unprofiled share' (of that median)."""
        if (self.data.get("time_scale") or {}).get("basis") == "unprofiled":
            return "unprofiled share"
        return self.device_label

    def inputs_key(self) -> str:
        """Runs are comparable when target, backend, mode and inputs are the same."""
        return json.dumps(self.data.get("inputs"), sort_keys=True)
