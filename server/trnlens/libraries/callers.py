"""The project lines of a run that called library code (for anchoring them in the editor)."""

from __future__ import annotations


def calling_lines(data: dict, relpath: str) -> set[int]:
    """0-based lines of ``relpath`` that called library code in this run (to anchor them)."""
    found = set()
    for frame in data.get("frames") or []:
        for caller in frame.get("callers") or []:
            if caller.get("path") == relpath and caller.get("line"):
                found.add(caller["line"] - 1)
    for entry in [*(data.get("modules") or []), *(data.get("library_findings") or [])]:
        callers = entry.get("callers") or [entry.get("caller") or {}]
        for caller in callers:
            if caller.get("path") == relpath and caller.get("line"):
                found.add(caller["line"] - 1)
    return found
