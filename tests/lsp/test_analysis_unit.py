"""Units of the editor's static analysis: positions, the provider, measured figures, summaries."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from trnlens.analysis import Location, analyse_source
from trnlens.fixvariants import NoFix, fix_variants
from trnlens.lsp.analysis import (
    DEBOUNCE_S,
    AnalysisService,
    measurement,
    split_lines,
    summarize,
    to_position,
)
from trnlens.lsp.documents import ProfiledDocument
from trnlens.results import Result
from trnlens.settings import Settings

from .session import FIXTURES

MODEL = (FIXTURES / "model.py").read_text("utf-8")

METHOD = """import torch


class RMSNorm(torch.nn.Module):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
"""


def test_positions_are_utf16_units():
    lines = split_lines('a = "é🙂"; b\r\nnext\rthird\nlast')
    assert lines == ['a = "é🙂"; b', "next", "third", "last"]
    # Column 11 (1-based code points) is `b`: 10 code points before it, 11 UTF-16 units.
    assert to_position(lines, Location(1, 11)) == types.Position(0, 11)
    assert to_position(lines, Location(1, 6)) == types.Position(0, 5)  # é is one unit
    assert to_position(lines, Location(2, 1)) == types.Position(1, 0)
    assert to_position(lines, Location(9, 3)) == types.Position(3, 4)  # past the end: clamped


class _Server:
    def __init__(self) -> None:
        self.documents: dict = {}


def _doc(text: str) -> ProfiledDocument:
    root = Path("/tmp/project")
    return ProfiledDocument("file:///tmp/project/model.py", root / "model.py", root, text, 1)


def test_provider_honours_rules_and_caches():
    service = AnalysisService(_Server(), None)  # type: ignore[arg-type]  # a fake context, no runs
    doc = _doc(MODEL)
    found = service.provider(doc, Settings())
    assert [d.code for d in found] == ["TRN001"]
    assert found[0].severity == types.DiagnosticSeverity.Warning and found[0].source == "trnlens"
    assert service.current(doc, Settings()) is service.current(doc, Settings())  # cached
    assert service.provider(doc, Settings(rules_ignore=("TRN001",))) == []
    assert service.provider(doc, Settings(rules_select=("TRN1",))) == []
    assert [d.code for d in service.provider(doc, Settings(rules_select=("TRN0",)))] == ["TRN001"]
    # No running loop (no debounce): a change is analysed at once.
    doc.text = MODEL.replace("return x * torch.rsqrt", "return x / torch.rsqrt")
    assert service.provider(doc, Settings()) == []


def _result(lines: list[dict], qualname: str = "rmsnorm_naive") -> Result:
    return Result(
        {
            "run_id": "r1",
            "created_at": "2020-01-01T00:00:00+00:00",
            "function": {"path": "model.py", "qualname": qualname, "line": 13},
            "backend": "cpu",
            "time_basis": "cpu",
            "error": None,
            "lines": lines,
        }
    )


def test_measured_text_sums_the_finding_lines():
    doc = _doc(MODEL)
    finding = analyse_source(MODEL, "model.py")[0]
    assert finding.lines == (14, 15)
    assert measurement(doc, finding) is None
    doc.place(
        _result(
            [
                {"path": "model.py", "line": 14, "dispatches": 2, "device_us": 30.0},
                {"path": "model.py", "line": 15, "dispatches": 4, "device_us": 1200.0},
                {"path": "other.py", "line": 14, "dispatches": 9, "device_us": 1.0},
            ]
        )
    )
    text, share = measurement(doc, finding)
    assert 0 < share <= 1
    assert text.startswith("measured: 6 dispatches, 1.23 ms CPU (ops) per step on lines 14–15")
    assert "(rmsnorm_naive, " in text and "device" not in text


def test_fix_variants_for_functions_and_methods():
    findings = analyse_source(MODEL, "model.py")
    variants = fix_variants("/p/model.py", "rmsnorm_naive", findings)
    assert [("source" in v, v.get("compile", False)) for v in variants] == [
        (False, False), (True, False), (False, True),
    ]  # fmt: skip
    assert variants[1]["label"] == "rmsnorm_naive (fixed: TRN001)" and "replaces" not in variants[1]
    assert "torch.rms_norm" in variants[1]["source"]
    with pytest.raises(NoFix, match="no fix for rmsnorm_fused"):
        fix_variants("/p/model.py", "rmsnorm_naive".replace("naive", "fused"), findings)
    with pytest.raises(NoFix, match="no TRN003 fix"):
        fix_variants("/p/model.py", "rmsnorm_naive", findings, code="TRN003")
    method = fix_variants("/p/m.py", "RMSNorm.forward", analyse_source(METHOD, "m.py"))
    assert method[1]["replaces"] == "RMSNorm.forward"
    assert method[1]["source"].startswith("def forward(self, x):")


def _variant(kind: str, label: str, dispatches: float, error=None) -> dict:
    return {
        "run_id": label,
        "created_at": "2020-01-01T00:00:00+00:00",
        "function": {"qualname": "f"},
        "variant": {"kind": kind, "label": label},
        "backend": "neuron",
        "device": "trn1",
        "time_basis": "device",
        "dispatches_per_step": dispatches,
        "device_time_per_step_us": 1840.0,
        "timing": {"median_us": 2000.0},
        "error": error,
    }


def test_summarize_reads_figures_and_labels_by_time_basis():
    outcome = {
        "variants": [
            _variant("function", "f", 6),
            _variant("source", "f (fixed: TRN001)", 1),
            _variant("compiled", "f (compiled)", 1),
        ],
        "speedups": [1.0, 3.0, 2.5],
        "speedup_ranges": [[0.9, 1.1], [2.5, 3.5], [2.0, 2.9]],
        "max_abs_diff": [0.0, 2e-7, 1e-6],
    }
    answer = summarize("f", outcome)
    assert answer["message"].startswith(
        # the headline (trnlens.headline): the timing pass's median, whatever the time basis
        "compared f: original 6 dispatches, 2.00 ms unprofiled/step; "
        "fixed TRN001 1 dispatch, 3.00× faster (2.50–3.50×), max |diff| 2.0e-07; "
        "compiled 1 dispatch, 2.50× faster (2.00–2.90×), max |diff| 1.0e-06"
    )
    assert answer["lens"] == "fixed 3.00× · compiled 2.50× · 6/1/1 dispatches"
    assert [v["dispatches"] for v in answer["variants"]] == [6, 1, 1]
    outcome["variants"][2]["error"] = {"message": "compile failed"}
    outcome["speedups"][2] = None
    answer = summarize("f", outcome)
    assert "compiled failed: compile failed" in answer["message"]
    assert answer["lens"] == "fixed 3.00× · compiled failed · 6/1/1 dispatches"


class _Config:
    def settings_for(self, root) -> Settings:
        return Settings()


class _PublishingServer(_Server):
    def __init__(self) -> None:
        super().__init__()
        self.config = _Config()
        self.published: list[list] = []
        self.publishing = asyncio.Event()
        self.service: AnalysisService | None = None

    def publish(self, uri: str, force: bool = False) -> None:
        assert self.service is not None
        doc = self.documents[uri]
        self.published.append(self.service.provider(doc, Settings()))
        self.publishing.set()


async def test_edits_are_analysed_once_typing_pauses():
    server = _PublishingServer()
    service = server.service = AnalysisService(server, None)  # type: ignore[arg-type]  # a fake context, no runs
    doc = _doc(MODEL)
    server.documents[doc.uri] = doc
    # open: analysed in a worker thread (lifecycle.did_open), then published
    service.adopt(doc, await asyncio.to_thread(service.prepare, doc.text, doc.relpath, Settings()))
    assert [d.code for d in service.provider(doc, Settings())] == ["TRN001"]
    before = service.current(doc)
    for step in range(3):  # keystrokes: the previous findings stand, one analysis is pending
        doc.text = MODEL.replace("return x * torch.rsqrt", "return x / torch.rsqrt") + "#" * step
        assert [d.code for d in service.provider(doc, Settings())] == ["TRN001"]
        assert service._cache[doc.uri] is before and len(service._pending) == 1
    await asyncio.wait_for(server.publishing.wait(), timeout=DEBOUNCE_S + 30)
    # Once, after the pause, on the last text; and no other analysis is still scheduled to
    # publish again (nothing pending), so none will follow.
    assert server.published == [[]]
    assert service._cache[doc.uri].text == doc.text and not service._pending
