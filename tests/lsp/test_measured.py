"""A static finding's severity and message once a run measured its lines (lsp/measured.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from trnlens.analysis import analyse_source
from trnlens.lsp import measured
from trnlens.lsp.analysis import AnalysisService
from trnlens.lsp.documents import ProfiledDocument
from trnlens.results import Result
from trnlens.settings import Settings

SYNC = """import torch


def train(xs):
    total = 0.0
    for x in xs:
        total += x.sum().item()
    return total
"""


def _finding(severity: str):
    (finding,) = analyse_source(SYNC, "model.py")
    finding.severity = severity
    return finding


@pytest.mark.parametrize(
    ("severity", "share", "shown"),
    [
        ("info", None, "info"),  # not measured: as analysed
        ("info", 0.05, "info"),  # measured, cheap
        ("info", 0.5, "warning"),  # measured, costly
        ("hint", 0.5, "info"),  # a needed sync, costly
        ("warning", 0.0, "warning"),  # a proven fix stays a warning
    ],
)
def test_severity_is_raised_only_when_measured_costly(severity, share, shown) -> None:
    assert measured.severity(_finding(severity), share, threshold=0.2) == shown


def test_the_not_measured_note_gives_way_to_the_figures() -> None:
    finding = _finding("info")
    assert measured.message(finding, None).endswith("(static: not measured)")
    text = measured.message(finding, "measured: 1 dispatch, 9 ms CPU (ops) per step on line 7")
    assert "not measured" not in text and text.endswith("per step on line 7")


class _Server:
    documents: dict = {}


def _placed(item_us: float) -> ProfiledDocument:
    root = Path("/tmp/project")
    doc = ProfiledDocument("file:///tmp/project/model.py", root / "model.py", root, SYNC, 1)
    lines = [
        {"path": "model.py", "line": 6, "dispatches": 1, "device_us": 100.0},
        {"path": "model.py", "line": 7, "dispatches": 2, "device_us": item_us},
    ]
    doc.place(
        Result(
            {
                "run_id": "r1",
                "created_at": "2020-01-01T00:00:00+00:00",
                "function": {"path": "model.py", "qualname": "train", "line": 4},
                "backend": "cpu",
                "time_basis": "cpu",
                "error": None,
                "lines": lines,
            }
        )
    )
    return doc


def test_a_sync_measured_costly_is_a_warning_with_its_time() -> None:
    service = AnalysisService(_Server(), None)  # type: ignore[arg-type]  # a fake context, no runs
    (before,) = service.provider(
        ProfiledDocument(
            "file:///tmp/project/model.py",
            Path("/tmp/project/model.py"),
            Path("/tmp/project"),
            SYNC,
            1,
        ),
        Settings(),
    )
    assert before.severity == types.DiagnosticSeverity.Information
    assert before.message.endswith("(static: not measured)")
    (costly,) = service.provider(_placed(item_us=900.0), Settings())
    assert costly.severity == types.DiagnosticSeverity.Warning
    assert "measured: 2 dispatches, 900 µs" in costly.message.replace("900.0", "900")
    (cheap,) = service.provider(_placed(item_us=10.0), Settings())
    assert cheap.severity == types.DiagnosticSeverity.Information and "measured:" in cheap.message
