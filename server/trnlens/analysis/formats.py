"""Rendering findings for people (text) and machines (ruff JSON, GitHub annotations, SARIF)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from trnlens import __version__
from trnlens.analysis.model import Finding

FORMATS = ("text", "json", "github", "sarif")


def render(findings: Sequence[Finding], fmt: str, rules: dict[str, tuple[str, str]]) -> str:
    if fmt == "json":
        return json.dumps([_ruff_json(f) for f in findings], indent=2) + "\n"
    if fmt == "github":
        return "".join(_github(f) + "\n" for f in findings)
    if fmt == "sarif":
        return json.dumps(_sarif(findings, rules), indent=2) + "\n"
    return "".join(_text(f) + "\n" for f in findings)


def _ruff_json(f: Finding) -> dict[str, Any]:
    return f.to_json()


def _text(f: Finding) -> str:
    fixable = " [*]" if f.fix and f.fix.applicability == "safe" else ""
    return f"{f.filename}:{f.location.row}:{f.location.column}: {f.code}{fixable} {f.message}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github(f: Finding) -> str:
    level = "error" if f.severity == "error" else "warning"
    props = (
        f"file={_escape_property(f.filename)},line={f.location.row},col={f.location.column},"
        f"endLine={f.end_location.row},endColumn={f.end_location.column},"
        f"title={_escape_property(f'trnlens ({f.code})')}"
    )
    return f"::{level} {props}::{_escape_data(f'{f.code} {f.message}')}"


def _sarif(findings: Sequence[Finding], rules: dict[str, tuple[str, str]]) -> dict[str, Any]:
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "trnlens",
                        "version": __version__,
                        "rules": [
                            {"id": code, "name": name, "shortDescription": {"text": summary}}
                            for code, (name, summary) in sorted(rules.items())
                        ],
                    }
                },
                "results": [_sarif_result(f) for f in findings],
            }
        ],
    }


def _sarif_result(f: Finding) -> dict[str, Any]:
    return {
        "ruleId": f.code,
        "level": "error" if f.severity == "error" else "warning",
        "message": {"text": f.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": f.filename.replace("\\", "/")},
                    "region": {
                        "startLine": f.location.row,
                        "startColumn": f.location.column,
                        "endLine": f.end_location.row,
                        "endColumn": f.end_location.column,
                    },
                }
            }
        ],
    }
