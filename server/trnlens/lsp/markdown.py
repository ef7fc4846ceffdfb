"""Text from a result put into Markdown (hovers) so that it stays text.

A result.json in ``.trnlens/`` may have been written by someone else (a synced or planted run):
its op names, qualname, messages and labels must not become links (``command:`` URIs), images,
HTML or table cells in the editor. ``text`` escapes every character Markdown or HTML gives a
meaning; ``code`` makes an inline code span that nothing inside can close.
"""

from __future__ import annotations

import re

# What starts emphasis, code, links, images, HTML, entities, tables or headings. Parentheses,
# dots and colons stay readable (in editors that show the Markdown source too): a link needs
# a "[" and an image a "!["; bare URLs (GFM autolinks) are broken up below.
_SPECIAL = re.compile(r"([\\`*\[\]<>#!|~&])")
# "_" inside a word never starts emphasis (CommonMark's flanking rules): rms_norm stays as is
_UNDERSCORE = re.compile(r"(?<!\w)_|_(?!\w)")
_AUTOLINK = re.compile(r"(?i)(://|www\.)")
_SHAPES = re.compile(r"^[\[\]0-9, ·…]*$")
_BACKTICKS = re.compile(r"`+")


def text(value: object) -> str:
    """``value`` as literal Markdown text, on one line."""
    flat = " ".join(str(value).split())
    if _SHAPES.match(flat):  # tensor shapes ("[4, 512] · [512]"): nothing to fear, keep readable
        return flat
    escaped = _UNDERSCORE.sub(r"\\_", _SPECIAL.sub(r"\\\1", flat))
    return _AUTOLINK.sub(lambda m: m.group(1).replace("/", "\\/").replace(".", "\\."), escaped)


def code(value: object) -> str:
    """``value`` as an inline code span: fenced by more backticks than it holds, on one line,
    ``|`` escaped for tables (GFM splits cells before it parses code spans)."""
    flat = " ".join(str(value).split()).replace("|", "\\|")
    longest = max((len(run) for run in _BACKTICKS.findall(flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
