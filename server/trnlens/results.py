"""The result model: what one run measured, as the server reads it.

The JSON Schema in ``schema/result.schema.json`` is the contract with the agent (which writes plain
dicts and cannot import this module); ``SCHEMA_VERSION`` comes from the agent's protocol module so
there is one number to bump. This module gives the server typed, checked access to a result.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from trnlens.agent.protocol import READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION


class SchemaMismatch(ValueError):
    pass


@functools.cache
def schema() -> dict:
    text = resources.files("trnlens").joinpath("schema/result.schema.json").read_text("utf-8")
    return json.loads(text)


def _defs() -> dict:
    return schema()["$defs"]


def required() -> tuple[str, ...]:
    """The keys every run's result has: the schema's list, so that the two cannot drift."""
    return tuple(_defs()["result"]["required"])


# A run id names a folder under .trnlens/ and results come from remote hosts: before anything
# turns one into a path it must be one plain folder name (no separator, no '..', not hidden).
# The agent's ids (the schema's pattern, 20260101T120000-0123abcd) are a narrower form; ids
# derived from them (tests, tools) stay readable.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict, "array": list, "string": str, "integer": int, "number": (int, float),
    "boolean": bool, "null": type(None),
}  # fmt: skip


def check(obj: Any) -> dict:
    """Returns ``obj`` when it is a result of a schema version we read, else raises SchemaMismatch.

    Every key the schema requires is there, with the schema's type (one level deep: the keys'
    own JSON types and enums, the run id's form, the function's fields). Older versions stay
    readable (stored history must survive an upgrade): each version since 1 only added optional
    fields.
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
        variants = obj["variants"]
        if not isinstance(variants, list) or not variants:
            raise SchemaMismatch("a comparison's variants must be a non-empty list")
        for variant in variants:
            check(variant)
        return obj
    missing = [key for key in required() if key not in obj]
    if missing:
        raise SchemaMismatch(f"result lacks {', '.join(missing)}")
    _check_fields(obj, _defs()["result"], "result")
    _check_fields(obj["function"], _defs()["result"]["properties"]["function"], "function")
    run_id = obj["run_id"]
    if not RUN_ID.fullmatch(run_id) or ".." in run_id:
        raise SchemaMismatch(
            f"result run_id {run_id!r} is not a run id (like 20260101T120000-0123abcd): "
            "refused, it names a folder under .trnlens/"
        )
    return obj


def _check_fields(obj: Any, spec: dict, what: str) -> None:
    if not isinstance(obj, dict):
        raise SchemaMismatch(f"{what} must be a JSON object, got {type(obj).__name__}")
    for key in spec.get("required", ()):
        if key not in obj:
            raise SchemaMismatch(f"{what} lacks {key}")
        problem = _mismatch(obj[key], spec["properties"].get(key, {}))
        if problem:
            raise SchemaMismatch(f"{what}.{key} {problem}")


def _mismatch(value: Any, spec: dict) -> str | None:
    """Why ``value`` does not fit ``spec`` at its top level (type, enum, oneOf), or None."""
    if "$ref" in spec:
        spec = _defs()[spec["$ref"].rsplit("/", 1)[-1]]
    if "oneOf" in spec:
        problems = [_mismatch(value, option) for option in spec["oneOf"]]
        return None if None in problems else problems[-1]
    if "enum" in spec and value not in spec["enum"]:
        return f"is {value!r}, expected one of {', '.join(map(repr, spec['enum']))}"
    types = spec.get("type")
    if types is None:
        return None
    names = [types] if isinstance(types, str) else types
    for name in names:
        kind = _JSON_TYPES[name]
        if isinstance(value, kind) and not (isinstance(value, bool) and name != "boolean"):
            return None
    return f"is {type(value).__name__}, expected {' or '.join(names)}"


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
