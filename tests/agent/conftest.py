"""Helpers for agent tests: small projects on disk and in-process runs with real torch."""

from __future__ import annotations

import sys
from pathlib import Path

from trnlens.agent.runner import Runner

FAST = {"backend": "cpu", "warmup": 1, "steps": 2, "repeats": 3}


def run(root: Path, variants: list[dict], phases: list | None = None, **overrides) -> dict:
    """Runs one request in this process (torch already imported) and returns the outcome."""
    request = {
        **FAST,
        "project_root": str(root),
        "variants": variants,
        "artifacts_dir": str(root / ".stage"),
        **overrides,
    }
    seen = phases if phases is not None else []
    return Runner(request, seen.append, lambda: False).run()


def line_of(root: Path, relative: str, needle: str) -> int:
    """1-based line of the first line containing ``needle``: tests name lines by their text."""
    for number, text in enumerate((root / relative).read_text().splitlines(), start=1):
        if needle in text:
            return number
    raise AssertionError(f"{needle!r} not in {relative}")


def forget_modules(prefix: str, before: set[str]) -> None:
    """Drop ``prefix`` and its submodules imported since ``before`` (a ``set(sys.modules)``): the
    analysis tests check that transformers is read as text and never imported, so a model test in
    the same process must not leave it behind."""
    for name in [n for n in sys.modules if n not in before]:
        if name == prefix or name.startswith(prefix + "."):
            del sys.modules[name]
