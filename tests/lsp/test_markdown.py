"""lsp/markdown: any text stays text once put into a hover (checked by a CommonMark parser)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from trnlens.lsp import markdown

PARSER = MarkdownIt("commonmark").enable("table")
ACTIVE = {"link_open", "image", "html_inline", "html_block", "strong_open", "em_open"}
PIECES = list("\\`*_[]()<>#!|~&:./ -=\"'") + ["http://", "www.", "&amp;", "<img src=x>", "](", "!["]
TRICKY = st.one_of(st.sampled_from(PIECES), st.text(max_size=3))


def inline(source: str):
    (paragraph,) = [t for t in PARSER.parse(source) if t.type == "inline"] or [None]
    return paragraph.children if paragraph is not None else []


def shown(tokens) -> str:
    return "".join(t.content for t in tokens if t.type in ("text", "code_inline"))


@settings(max_examples=400, deadline=None)
@given(st.lists(TRICKY, min_size=1, max_size=10).map("".join))
def test_text_renders_as_itself_with_no_markup(value):
    flat = " ".join(value.split()).replace("\0", "\ufffd")  # CommonMark's own NUL rule
    tokens = inline("x " + markdown.text(value))  # mid-line, as in a hover
    assert not ACTIVE & {t.type for t in tokens}, tokens
    assert shown(tokens) == ("x " + flat).rstrip()


@settings(max_examples=400, deadline=None)
@given(st.lists(TRICKY, min_size=1, max_size=10).map("".join))
def test_code_spans_hold_anything(value):
    flat = " ".join(value.split()).replace("\0", "\ufffd")
    tokens = inline("x " + markdown.code(value))
    assert [t.type for t in tokens if t.type != "text"] == ["code_inline"]
    if flat and flat.strip():
        assert shown(tokens).strip().replace("\\|", "|") == ("x " + flat).strip()


def test_shapes_and_labels_stay_readable():
    assert markdown.text("[4, 512, 2048] · [2048]") == "[4, 512, 2048] · [2048]"
    assert markdown.text("CPU (ops)") == "CPU (ops)"
    assert markdown.text("Block.rms_norm_naive") == "Block.rms_norm_naive"
    assert markdown.text("_private") == "\\_private"
    assert markdown.text("see http://evil/x") == "see http:\\/\\/evil/x"
