"""Documents: profilable symbols, placing runs, edits, stale."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from trnlens.agent import sources
from trnlens.lsp.documents import ProfiledDocument, analyse
from trnlens.results import Result

TEXT = """import torch
from torch import nn


def helper(x):
    return x.sin()


class Base(nn.Module):
    def forward(self, x):
        y = x.cos()
        return helper(y)


class Child(Base):
    pass


class Plain:
    def method(self):
        return 1
"""


def _doc(text: str = TEXT) -> ProfiledDocument:
    return ProfiledDocument("file:///p/m.py", Path("/p/m.py"), Path("/p"), text, generation=1)


def _result(qualname: str, def_line: int, lines: dict[int, float], text: str = TEXT, **extra):
    definition = sources.find_definition(text, qualname)
    data = {
        "run_id": "r1", "created_at": "2026-01-01T00:00:00+00:00", "target": "local",
        "backend": "cpu", "time_basis": "cpu", "device_time_per_step_us": sum(lines.values()),
        "function": {"path": "m.py", "qualname": qualname, "line": def_line,
                     "source_hash": sources.source_hash(text, definition)},
        "lines": [{"path": "m.py", "line": n, "device_us": us, "cpu_us": us, "dispatches": 1}
                  for n, us in lines.items()],
        "ops": [], "error": None, **extra,
    }  # fmt: skip
    return Result(data)


def test_symbols_are_functions_methods_and_module_classes_only():
    analysis = analyse(TEXT)
    assert set(analysis.symbols) == {"helper", "Base", "Base.forward", "Child", "Plain.method"}
    assert analysis.imports_torch
    assert not analyse("import numpy\n\ndef f():\n    pass\n").imports_torch
    assert analysis.symbols["Base.forward"].def_line == 9


def test_stale_follows_the_source_hash():
    doc = _doc()
    placement = doc.place(_result("helper", 5, {6: 10.0}))
    assert not doc.is_stale(placement)
    new = TEXT.replace("x.sin()", "x.tan()")
    doc.update(new, [_edit(5, 13, 5, 16, "tan")])
    assert doc.is_stale(placement)


def _edit(sl, sc, el, ec, text):
    return types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(sl, sc), types.Position(el, ec)), text=text
    )


def test_a_run_placed_with_its_mark_follows_edits_made_while_it_ran():
    doc = _doc()
    mark = doc.mark()
    doc.update("# one\n# two\n" + TEXT, [_edit(0, 0, 0, 0, "# one\n# two\n")])
    placement = doc.place(_result("helper", 5, {6: 10.0}), mark)
    doc.release(mark)
    assert [line for line, _, _ in doc.line_figures()] == [7]
    assert not doc.is_stale(placement)


def test_a_stored_run_is_shifted_by_how_far_its_def_moved():
    doc = _doc("\n\n\n" + TEXT)  # three lines more above than when it was measured
    doc.place(_result("helper", 5, {6: 10.0}))
    assert [line for line, _, _ in doc.line_figures()] == [8]


def test_while_the_text_does_not_parse_symbols_keep_following_edits():
    doc = _doc()
    assert doc.analysis().def_line_now(doc.analysis().symbols["helper"]) == 4
    broken = "def (\n" + TEXT
    doc.update(broken, [_edit(0, 0, 0, 0, "def (\n")])
    analysis = doc.analysis()
    assert analysis.def_line_now(analysis.symbols["helper"]) == 5


def test_error_line_and_the_edit_log_is_dropped_once_no_run_waits():
    doc = _doc()
    error = {"kind": "user_code", "type": "ValueError", "message": "ValueError: x",
             "path": "m.py", "line": 11, "traceback": None}  # fmt: skip
    placement = doc.place(_result("Base.forward", 10, {}, error=error))
    assert placement.now(placement.error_line) == 10
    mark = doc.mark()
    doc.update("#\n" + TEXT, [_edit(0, 0, 0, 0, "#\n")])
    assert placement.now(placement.error_line) == 11
    doc.release(mark)
    assert doc._log == []
