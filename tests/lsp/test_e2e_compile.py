"""End to end: profiling a torch.compile'd function shows its graph break where the code is."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from lsprotocol import types

from .session import editor, workspace

SAMPLE = Path(__file__).parents[2] / "samples" / "graph_break.py"


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


@pytest.mark.slow
async def test_compiled_run_shows_the_break_its_graphs_and_confirms_the_hint(tmp_path):
    root = workspace(tmp_path)
    shutil.copy(SAMPLE, root / "graph_break.py")
    text = (root / "graph_break.py").read_text("utf-8")
    print_line = _line_of(text, 'print("variance')
    def_line = _line_of(text, "def rmsnorm_logged")
    async with editor(root) as ed:
        uri = ed.open("graph_break.py")
        # Before any run: the static hint (information), nothing measured.
        hint = await ed.wait_for(lambda: ed.diagnostics(uri, "TRN201"), what="the TRN201 hint")
        assert [d.range.start.line for d in hint] == [print_line]
        assert hint[0].severity == types.DiagnosticSeverity.Information
        assert ed.diagnostics(uri, "graph-break") == []

        await ed.profile(uri, "rmsnorm_logged")

        [broken] = await ed.wait_for(
            lambda: ed.diagnostics(uri, "graph-break"), what="the graph-break diagnostic"
        )
        assert broken.range.start.line == print_line
        assert broken.severity == types.DiagnosticSeverity.Warning
        assert re.match(
            r"graph break: Failed to trace builtin operator: .*`print`.*; 2 graphs, "
            r"2 dispatches per step",
            broken.message,
        ), broken.message
        [confirmed] = ed.diagnostics(uri, "TRN201")
        assert "confirmed by the compiled run (just now)" in confirmed.message
        assert ed.diagnostics(uri, "recompile") == []  # same inputs every step

        command = (await ed.lenses(uri))["rmsnorm_logged"].command
        # a long title leaves out the age (lenses.fit); the tooltip keeps the whole of it
        full = command.tooltip or command.title
        # then the memory pass's peak (docs/memory.md), then the age
        assert re.search(
            r"· compiled in [\d.]+ (ms|s) · 2 graphs · 1 break · "
            r"peak [\d.]+ (B|KB|MB|GB) · just now$",
            full,
        ), full
        assert re.search(r"· compiled in [\d.]+ (ms|s) · 2 graphs · 1 break", command.title)

        body = (await ed.hover(uri, def_line)).contents.value
        assert "**torch.compile**" in body and "| graph | where | ops |" in body
        assert re.search(r"\| 1 \| `graph_break.py:\d+` \| 2 \|", body), body
        assert re.search(r"\| 2 \| `graph_break.py:\d+` \| 4 \|", body)
        assert "graph 1: pow, mean" in body and "graph 2: add, rsqrt, mul, mul" in body

        # The break follows an edit above it.
        ed.edit(uri, 0, 0, "# a new first line\n")
        await ed.wait_for(
            lambda: [d for d in ed.diagnostics(uri, "graph-break")
                     if d.range.start.line == print_line + 1],
            what="the break moved with the edit",
        )  # fmt: skip
