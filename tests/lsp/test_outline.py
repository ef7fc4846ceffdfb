"""A document parsed block by block (lsp/outline.py): the same definitions as one parse of the
whole module, and an edit re-parses only the block it touched."""

from __future__ import annotations

import ast

import pytest
from trnlens.agent import sources
from trnlens.lsp.outline import outline

from .session import FIXTURES

TRICKY = '''import torch as T
from torch import nn

NOTE = """
def not_a_function():
    pass
"""


@decorator
class Net(nn.Module):
    def forward(self, x: T.Tensor):
        return x


async def helper(x):
    return x
'''


def whole(text: str) -> list[tuple]:
    tree = ast.parse(text)
    return [
        (q, n.lineno - 1, (n.end_lineno or n.lineno) - 1, n.col_offset)
        for q, n, _ in sources.iter_definitions(tree)
    ]


@pytest.mark.parametrize("name", ["model.py", "tricky"])
def test_blocks_give_the_definitions_of_the_whole_module(name):
    text = TRICKY if name == "tricky" else (FIXTURES / name).read_text("utf-8")
    found = outline(text)
    lines = [(d.qualname, o + d.def_line, o + d.end_line, d.column) for o, d in found.definitions]
    assert lines == whole(text)
    if name == "tricky":
        assert found.torch_names == {"T", "nn"}
        net = next(d for _, d in found.definitions if d.qualname == "Net")
        assert net.bases == ("Module",) and net.start_line == net.def_line - 1  # its decorator


def test_a_module_that_does_not_parse_raises_as_the_parser_does():
    with pytest.raises(SyntaxError):
        outline("def f(:\n    pass\n")
    with pytest.raises(SyntaxError):
        outline("  indented = 1\n")


def test_an_edit_reparses_only_its_block(monkeypatch):
    text = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(50))
    outline(text)
    parsed: list[str] = []
    real = sources.parse
    monkeypatch.setattr(sources, "parse", lambda t, *a: parsed.append(t) or real(t, *a))
    edited = text.replace("return x + 7\n", "return x * 7\n")
    assert [d.qualname for _, d in outline(edited).definitions] == [f"f{i}" for i in range(50)]
    assert parsed == ["def f7(x):\n    return x * 7\n\n\n"]


def test_a_big_text_that_does_not_parse_is_never_parsed_whole(monkeypatch):
    """Over WHOLE_PARSE_MAX_LINES a text whose blocks do not parse raises without a whole-text
    parse (one call holding the interpreter beside the server's loop); under it, as before."""
    from trnlens.lsp import outline as module

    block = "def f{n}(x):\n    return x * 2\n\n\n"
    text = "".join(block.format(n=n) for n in range(module.WHOLE_PARSE_MAX_LINES // 4 + 10))
    text += "y = foo(1,\n" + block.format(n="_last")
    parsed: list[str] = []
    monkeypatch.setattr(sources, "parse", lambda t: parsed.append(t) or ast.parse(t))
    with pytest.raises(SyntaxError):
        outline(text)
    assert text not in parsed
    monkeypatch.setattr(module, "WHOLE_PARSE_MAX_LINES", 10**9)
    with pytest.raises(SyntaxError):
        outline(text)
    assert text in parsed
