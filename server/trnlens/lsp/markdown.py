"""Text from a result put into Markdown (hovers) so that it stays text.

A result.json in ``.trnlens/`` may have been written by someone else (a synced or planted run):
its op names, qualname, messages and labels must not become links (``command:`` URIs), images,
HTML or table cells in the editor. ``text`` escapes every character Markdown or HTML gives a
meaning; ``code`` makes an inline code span that nothing inside can close.
"""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~&:\"'=])")
_BACKTICKS = re.compile(r"`+")


def text(value: object) -> str:
    """``value`` as literal Markdown text, on one line."""
    flat = " ".join(str(value).split())
    return _SPECIAL.sub(r"\\\1", flat)


def code(value: object) -> str:
    """``value`` as an inline code span: fenced by more backticks than it holds, on one line,
    ``|`` escaped for tables (GFM splits cells before it parses code spans)."""
    flat = " ".join(str(value).split()).replace("|", "\\|")
    longest = max((len(run) for run in _BACKTICKS.findall(flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
