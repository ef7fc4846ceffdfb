"""Rendering findings for people (text) and machines (ruff JSON, GitHub annotations, SARIF), and
their counts per rule (``--statistics``, in ruff's layout)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from trnlens import __version__
from trnlens.agent.notebook.cells import cell_label
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


def statistics(findings: Sequence[Finding], fmt: str, rules: dict[str, tuple[str, str]]) -> str:
    """Findings counted per rule, most first, as ruff's ``--statistics`` prints them: count, code,
    ``[*]`` where every finding has a safe fix, the rule's name. JSON: a list of those fields."""
    counts = Counter(f.code for f in findings)
    fixable = Counter(f.code for f in findings if f.fix and f.fix.applicability == "safe")
    rows = [
        {
            "code": code,
            "name": rules.get(code, ("", ""))[0],
            "count": count,
            "fixable": fixable[code] == count,
        }
        for code, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    width = max((len(str(r["count"])) for r in rows), default=1)
    return "".join(
        f"{r['count']:>{width}}\t{r['code']}\t{'[*]' if r['fixable'] else '[ ]'} {r['name']}\n"
        for r in rows
    )


def _ruff_json(f: Finding) -> dict[str, Any]:
    return f.to_json()


def cell_name(f: Finding) -> str:
    """How the text formats name a notebook cell: ``cell 4 (id 'a1b2')`` (counted from 1, as
    ruff and VS Code's status bar count; the JSON's ``index`` is 0-based); "" outside
    notebooks."""
    if f.cell is None:
        return ""
    return cell_label(f.cell.index) + (f" (id {f.cell.id!r})" if f.cell.id else "")


def _text(f: Finding) -> str:
    fixable = " [*]" if f.fix and f.fix.applicability == "safe" else ""
    where = f"{f.filename}:" + (f"{cell_name(f)}:" if f.cell else "")
    return f"{where}{f.location.row}:{f.location.column}: {f.code}{fixable} {f.message}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


# GitHub annotations know error, warning and notice; SARIF error, warning, note and none.
_GITHUB_LEVEL = {"error": "error", "warning": "warning"}
_SARIF_LEVEL = {"error": "error", "warning": "warning"}


def _github(f: Finding) -> str:
    level = _GITHUB_LEVEL.get(f.severity, "notice")
    props = (
        f"file={_escape_property(f.filename)},line={f.location.row},col={f.location.column},"
        f"endLine={f.end_location.row},endColumn={f.end_location.column},"
        f"title={_escape_property(f'trnlens ({f.code})' + (f' {cell_name(f)}' if f.cell else ''))}"
    )
    # GitHub places a notebook's annotation by its rows, which here count in the cell: the
    # message names the cell and the row there.
    where = f"{cell_name(f)}, line {f.location.row}: " if f.cell else ""
    return f"::{level} {props}::{_escape_data(f'{where}{f.code} {f.message}')}"


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
    found = _sarif_plain(f)
    if f.cell is not None:
        # SARIF has no notebook cells: the region's rows count in the cell that the result's
        # properties and its message name.
        found["message"]["text"] = f"{cell_name(f)}, line {f.location.row}: {f.message}"
        found["properties"] = {"notebookCell": f.cell.to_json()}
        logical = {"name": cell_label(f.cell.index), "kind": "notebookCell"}
        if f.cell.id:
            logical["fullyQualifiedName"] = f.cell.id
        found["locations"][0]["logicalLocations"] = [logical]
    return found


def _sarif_plain(f: Finding) -> dict[str, Any]:
    return {
        "ruleId": f.code,
        "level": _SARIF_LEVEL.get(f.severity, "note"),
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
