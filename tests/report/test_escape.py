"""Escaping: nothing from a result becomes markup or leaves its script element."""

from __future__ import annotations

import json

from trnlens.report import escape


def test_text_and_attributes_are_escaped():
    assert escape.text("<script>&") == "&lt;script&gt;&amp;"
    assert escape.attr('" onload="x') == "&quot; onload=&quot;x"
    assert escape.text(None) == ""


def test_script_json_cannot_close_its_element_and_parses_back():
    value = {"name": "</script><script>alert(1)</script>", "s": "a\u2028b&<!--"}
    encoded = escape.script_json(value)
    assert "</script" not in encoded.lower() and "<!--" not in encoded
    assert json.loads(encoded) == value


def test_only_plain_relative_paths_become_links():
    assert escape.relative_href("../run/trace.json") == "../run/trace.json"
    for bad in (
        "https://x.org/t.json",
        "javascript:alert(1)",
        "/etc/passwd",
        "//host/x",
        "a\\b",
        "",
    ):
        assert escape.relative_href(bad) is None, bad
