"""Measured findings and the Neuron summary in the editor (lsp/run_findings.py), from placed
results written here (a Neuron one with a device summary this machine cannot produce: a stand-in
result)."""

from __future__ import annotations

from lsprotocol import types
from trnlens.lsp import hovers, lenses, run_findings
from trnlens.settings import resolve

from tests.lsp.test_features import TEXT, _doc, _no_jobs, _result

FINDING = {
    "id": "launch-bound", "message": "launch-bound: 200 dispatches per step", "op": "aten::pow",
    "time_us": 250.0, "share": 0.25, "path": "m.py", "line": 5, "matcher": "trnlens",
    "fix": None, "details": {},
}  # fmt: skip


def _placed(**extra):
    result = _result()
    result.data.update(extra)
    doc = _doc()
    doc.place(result)
    return doc


def test_a_finding_is_a_diagnostic_at_its_line_and_follows_edits():
    doc = _placed(findings=[FINDING, {**FINDING, "path": "other.py"}])
    (diagnostic,) = run_findings.provider(doc, resolve({}))
    assert diagnostic.source == "trnlens (measured)" and diagnostic.code == "launch-bound"
    assert diagnostic.range.start.line == 4
    assert "measured: 250 µs CPU (ops) per step, 25% of the step (f, " in diagnostic.message
    # Two lines inserted above: the finding moves with its line.
    doc.update("import torch\n\n\n" + doc.text[len("import torch\n") :], [None])
    (moved,) = run_findings.provider(doc, resolve({}))
    assert moved.range.start.line == 6 and "stale" not in moved.message


def test_advice_only_findings_offer_no_edit():
    doc = _placed(findings=[FINDING])
    (diagnostic,) = run_findings.provider(doc, resolve({}))
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(doc.uri),
        range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic]),
    )
    assert run_findings.code_actions(doc, params) == []


def test_static_findings_confirmed_or_cleared_by_a_run():
    doc = _placed(findings=[FINDING])
    assert run_findings.static_verdict(doc, "TRN101", 4, 4, 1) == (
        "confirmed by a run (launch-bound measured here)"
    )
    assert (
        run_findings.static_verdict(doc, "TRN001", 5, 6, 3)
        == "confirmed by a run (3 dispatches here)"
    )
    assert run_findings.static_verdict(doc, "TRN001", 5, 6, 1).startswith("cleared by a run")
    assert run_findings.static_verdict(doc, "TRN101", 5, 6, 3) == ""


def test_neuron_summary_on_the_lens_and_in_the_hover():
    summary = {
        "source": "summary-json", "mfu_percent": 31.2, "hfu_percent": 44.0, "mbu_percent": 22.0,
        "total_time_s": 0.0123, "average_dma_size_bytes": 2048,
        "recommendations": [{"id": "transposes", "message": "transposes are 15% of the FLOPs"}],
    }  # fmt: skip
    result = _result(time_basis="device", backend="neuron")
    result.data.update(device_summary=summary, mode="as-written", mode_reason="auto: calls x")
    doc = _doc()
    doc.place(result)
    (wire,) = lenses.code_lenses(doc, "local", "torch")
    lens = lenses.resolve(
        doc,
        types.CodeLens(types.Range(types.Position(3, 0), types.Position(3, 0)), data=wire["data"]),
        _no_jobs,
    )
    assert " · MFU 31% · " in lens.command.title
    text = hovers.hover(doc, types.Position(3, 0), None).contents.value
    assert "mode `as-written`: auto: calls x" in text
    assert "MFU 31% · HFU 44% · MBU 22% · total 12.3 ms · average DMA 2048 B" in text
    assert "- transposes are 15% of the FLOPs" in text


def test_a_finding_goes_once_its_fix_is_in_the_text_and_is_a_hint_once_stale():
    foreach = {**FINDING, "id": "optimizer-single-tensor", "fix": "foreach",
               "details": {"optimizer": "SGD"}}  # fmt: skip
    result = _result()
    result.data["findings"] = [foreach]
    doc = _doc()
    doc.update(TEXT + "opt = torch.optim.SGD([], lr=0.1)\n", [None])
    doc.place(result)
    (warning,) = run_findings.provider(doc, resolve({}))
    assert warning.severity == types.DiagnosticSeverity.Warning
    # the quick fix applied (the optimizer is outside the function: the run is not stale)
    doc.update(TEXT + "opt = torch.optim.SGD([], lr=0.1, foreach=True)\n", [None])
    assert run_findings.provider(doc, resolve({})) == []
    # the function itself edited: the run is stale, its finding a Hint (out of the Problems)
    doc.update(
        TEXT.replace("z.sum()", "z.sum() + 1") + "opt = torch.optim.SGD([], lr=0.1)\n",
        [None],
    )
    (hint,) = run_findings.provider(doc, resolve({}))
    assert hint.severity == types.DiagnosticSeverity.Hint and "stale" in hint.message


def test_a_share_just_under_the_bar_never_reads_as_at_it():
    """0.996% is Information: its words must not say "1.0%" (seen in a fresh-clone run)."""
    assert run_findings.share_text(0.00996) == "0.9%"
    assert run_findings.severity(0.00996) == types.DiagnosticSeverity.Information
    assert run_findings.share_text(0.01) == "1%"
    assert run_findings.share_text(0.0049) == "0.4%"
