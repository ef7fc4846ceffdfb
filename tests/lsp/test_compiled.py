"""Presentation of a compiled run (lsp/compiled.py) on a document, edits included.

The compile field here is written the way the agent writes it (see tests/agent/test_compilelog.py
and tests/lsp/test_e2e_compile.py for real compiled runs); these tests check where and how the
editor shows each part, which a real compile cannot vary cheaply (a warm-up recompile, say).
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from trnlens.agent import sources
from trnlens.analysis import analyse_source
from trnlens.lsp import compiled
from trnlens.lsp.documents import ProfiledDocument
from trnlens.results import Result
from trnlens.settings import Settings

TEXT = """import torch


@torch.compile
def f(x):
    y = x.sin()
    print("between")
    if y.sum() > 0:
        y = y + 1
    return y.cos()
"""
PRINT, DEF = 6, 4  # 0-based lines


def _result(recompile_phase: str = "measured") -> Result:
    definition = sources.find_definition(TEXT, "f")
    graph = {"compile_id": "0/0", "function": "f", "path": "m.py", "line": 5, "ops": 1,
             "op_names": ["sin"], "phase": "first_call"}  # fmt: skip
    return Result(
        {
            "run_id": "r1", "created_at": "2026-01-01T00:00:00+00:00", "target": "local",
            "backend": "cpu", "device": "d0", "time_basis": "cpu", "mode": "inference",
            "device_time_per_step_us": 10.0, "cpu_time_per_step_us": 11.0,
            "dispatches_per_step": 2, "error": None, "lines": [], "ops": [],
            "function": {"path": "m.py", "qualname": "f", "line": 5,
                         "source_hash": sources.source_hash(TEXT, definition)},
            "compile": {
                "graphs": [graph, {**graph, "compile_id": "1/0", "line": 7, "ops": 2,
                                   "op_names": ["add", "cos"]}],
                "graphs_per_call": 2,
                "breaks": [{"path": "m.py", "line": PRINT + 1, "function": "f",
                            "reason": "Failed to trace builtin operator: `print`",
                            "hints": ["Avoid calling builtin `print`."]}],
                "recompiles": [{"function": "f", "path": "m.py", "line": 5,
                                "guard": "tensor 'x' size mismatch at index 0. expected 4, "
                                         "actual 5", "phase": recompile_phase}],
                "compile_time_us": {"total_us": 4.5e6, "tracing_us": 0.5e6, "backend_us": 4e6},
                "compiled_in_run": True, "reused_from": None, "warnings": [],
            },
        }
    )  # fmt: skip


def _doc() -> ProfiledDocument:
    return ProfiledDocument("file:///p/m.py", Path("/p/m.py"), Path("/p"), TEXT, generation=1)


def test_break_at_its_line_recompile_on_the_function():
    doc = _doc()
    doc.place(_result())
    found = {d.code: d for d in compiled.diagnostics(doc, Settings())}
    broken, recompiled = found["graph-break"], found["recompile"]
    assert broken.range.start.line == PRINT
    assert broken.message.startswith(
        "graph break: Failed to trace builtin operator: `print`; 2 graphs, 2 dispatches per step"
    )
    assert "hint: Avoid calling builtin `print`." in broken.message
    assert recompiled.range.start.line == DEF
    assert "recompiled 1 time in the measured window" in recompiled.message
    assert "size mismatch at index 0. expected 4, actual 5" in recompiled.message
    assert {d.severity for d in found.values()} == {types.DiagnosticSeverity.Warning}


def test_a_warm_up_recompile_is_not_a_diagnostic_and_breaks_follow_edits():
    doc = _doc()
    doc.place(_result(recompile_phase="warmup"))
    new = "# new\n" + TEXT  # a full-text change: mapped by a line diff
    doc.update(new, [types.TextDocumentContentChangeWholeDocument(text=new)])
    found = compiled.diagnostics(doc, Settings())
    assert [(d.code, d.range.start.line) for d in found] == [("graph-break", PRINT + 1)]


def test_lens_and_hover_show_compile_time_and_graphs():
    result = _result()
    assert compiled.lens_text(result) == "compiled in 4.50 s · 2 graphs · 1 break"
    hover = "\n".join(compiled.hover_lines(result))
    assert "first call compile: tracing 500 ms, backend 4.00 s" in hover
    assert "| 1 | `m.py:5` | 1 |" in hover and "| 2 | `m.py:7` | 2 |" in hover
    # op names under the table, one graph a line: no cell wraps mid-name in a narrow hover
    assert "graph 1: sin" in hover and "graph 2: add, cos" in hover


def test_static_hints_are_confirmed_or_cleared_by_the_compiled_run():
    doc = _doc()
    doc.place(_result())
    findings = {f.code: f for f in analyse_source(TEXT, "m.py") if f.code.startswith("TRN2")}
    assert set(findings) == {"TRN201", "TRN203"}
    assert compiled.static_verdict(doc, findings["TRN201"]) == (
        "confirmed by the compiled run (just now): Failed to trace builtin operator: `print`"
    ).replace("just now", compiled.format.age("2026-01-01T00:00:00+00:00"))
    assert compiled.static_verdict(doc, findings["TRN203"]).startswith("cleared by the compiled")
