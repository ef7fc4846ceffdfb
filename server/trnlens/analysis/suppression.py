"""``# noqa`` comments and ``--select``/``--ignore``: which findings the user wants to see."""

from __future__ import annotations

import re
from collections.abc import Iterable

# A bare noqa comment silences every code on the line; one naming codes (TRN001, or a prefix
# such as TRN1) silences only those, as ruff reads them.
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]*(?:[\s,]+[A-Z]+[0-9]*)*))?", re.I)


def noqa_codes(line: str) -> frozenset[str] | None:
    """None: no noqa on the line; empty set: a bare noqa; otherwise the codes it names."""
    match = _NOQA.search(line)
    if match is None:
        return None
    codes = match.group("codes")
    if not codes:
        return frozenset()
    return frozenset(c.upper() for c in re.split(r"[\s,]+", codes.strip()) if c)


def is_suppressed(code: str, lines: Iterable[str]) -> bool:
    for line in lines:
        codes = noqa_codes(line)
        if codes is not None and (not codes or any(code.startswith(c) for c in codes)):
            return True
    return False


def is_selected(
    code: str, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
) -> bool:
    """Select and ignore take codes or prefixes (``TRN1``); ``ALL`` selects everything.

    The longer (more specific) of a matching select and ignore entry wins, as in ruff.
    """
    selected = _longest_prefix(code, select if select is not None else ["ALL"])
    ignored = _longest_prefix(code, ignore or [])
    if selected < 0:
        return False
    return ignored < 0 or selected > ignored


def _longest_prefix(code: str, prefixes: Iterable[str]) -> int:
    best = -1
    for prefix in prefixes:
        prefix = prefix.strip().upper()
        if prefix == "ALL":
            best = max(best, 0)
        elif prefix and code.startswith(prefix):
            best = max(best, len(prefix))
    return best
