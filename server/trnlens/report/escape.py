"""Escaping everything that came from a run (op names, paths, source text, warnings) into HTML.

A result.json is data from another process, possibly another machine: nothing in it may become
markup. Text goes through ``text``/``attr`` (stdlib ``html.escape``), data for the page's script
through ``script_json``, whose output cannot close the ``<script>`` element it sits in.
"""

from __future__ import annotations

import html
import json
from typing import Any

# Characters that could end a <script> element, start a comment or break a JS string literal.
_SCRIPT_UNSAFE = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def text(value: Any) -> str:
    """Element content."""
    return html.escape("" if value is None else str(value), quote=False)


def attr(value: Any) -> str:
    """An attribute value (always written inside double quotes)."""
    return html.escape("" if value is None else str(value), quote=True)


def script_json(value: Any) -> str:
    """JSON to embed in ``<script type="application/json">``: parsed back by JSON.parse."""
    encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return "".join(_SCRIPT_UNSAFE.get(ch, ch) for ch in encoded)


def relative_href(path: str) -> str | None:
    """A link to a local file next to the report, or None when ``path`` is not a plain relative
    path (a scheme, an absolute path or a protocol-relative ``//`` would load from elsewhere)."""
    if not path or ":" in path or path.startswith(("/", "\\")) or "\\" in path:
        return None
    return attr(path)
