"""Findings a user can act on (issue 42, point 6): a finding in torch's own code is a Warning only
with what the project can pass to leave that code (``fused=True``), else Information; a measured
finding under 1% of the step is Information; the library finding's sentence is grammatical and
says its dispatches per call plainly (libraries/rules.py, lsp/library.py, lsp/run_findings.py)."""

from __future__ import annotations

import ast
import copy
import importlib.util
from pathlib import Path

from lsprotocol import types
from trnlens.libraries import rules
from trnlens.lsp import library, run_findings
from trnlens.results import Result
from trnlens.settings import resolve

from tests.libraries.fixtures import CALLER, llama_result
from tests.lsp.test_features import _doc, _result
from tests.lsp.test_run_findings import FINDING

# the installed torch's, read as text by the rules as after a real run (never imported here)
ADAM = str(Path(importlib.util.find_spec("torch").origin).parent / "optim" / "adam.py")
TORCH = {"name": "torch", "version": "2.13.0"}


def _span(path: str, name: str) -> tuple[int, int]:
    tree = ast.parse(Path(path).read_text("utf-8"))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    return node.lineno, node.end_lineno or node.lineno


def _optimizer_step_result() -> dict:
    """A fine-tuning step's optimizer: torch's ``_multi_tensor_adam`` ran 24 dispatches a step,
    called from the project's ``opt.step()`` line."""
    first, last = _span(ADAM, "_multi_tensor_adam")
    result = llama_result()
    result["frames"] = [
        {"path": ADAM, "line": line, "function": "_multi_tensor_adam", "project": False,
         "library": TORCH, "dispatches_per_step": 12.0, "self_time_per_step_us": 400.0,
         "callers": [{**CALLER, "dispatches_per_step": 12.0}]}
        for line in (first + 40, last - 5)
    ]  # fmt: skip
    result["modules"] = []
    result["dispatches_per_step"] = 500
    return result


def test_a_finding_in_torchs_optimizer_reads_as_a_sentence():
    findings = rules.library_findings(_optimizer_step_result())
    [found] = [f for f in findings if f["code"] == "TRN105"]
    # was "_multi_tensor_adam (...) is `beta1` does not change in the loop but is moved ..."
    assert found["message"].startswith("_multi_tensor_adam (torch 2.13.0, adam.py:")
    assert (
        "): `beta1` does not change in the loop but is moved to the device every "
        in (found["message"])
    )
    assert found["message"].endswith("; measured 24 of 500 dispatches per step")
    assert " is `" not in found["message"]


def test_a_forward_and_backward_cost_says_per_call_for_both():
    result = llama_result()
    for frame in result["frames"]:
        if "modeling_llama" in frame["path"]:
            frame["backward_dispatches_per_step"] = frame["dispatches_per_step"] * 2
            frame["dispatches_per_step"] *= 3
    findings = rules.library_findings(result)
    [found] = [f for f in findings if f["code"] == "TRN001"]
    # was "8 dispatches a call forward and 16 backward": "16 backward" read as a count of its own
    assert (
        "is a naive RMSNorm: 8 dispatches forward and 16 backward per call, 5 calls, "
        in (found["message"])
    ), found["message"]


def _diagnostics(entry: dict) -> list[types.Diagnostic]:
    """The library finding on its calling line of a project document."""
    doc = _doc()
    result = _result()
    caller = {"path": "m.py", "line": 5, "dispatches_per_step": 12.0}
    result.data["library_findings"] = [{**entry, "callers": [caller]}]
    doc.place(result)
    return library.diagnostics(doc, [])


def _entry(**extra) -> dict:
    [found] = [f for f in rules.library_findings(_optimizer_step_result()) if f["code"] == "TRN105"]
    return {**found, **extra}


def test_torchs_own_code_warns_only_with_what_the_project_can_pass():
    [multi] = _diagnostics(_entry())
    assert multi.severity == types.DiagnosticSeverity.Warning
    assert "pass fused=True to torch.optim.Adam (or AdamW) where the optimizer is built" in (
        multi.message
    )
    single = _entry(qualname="_single_tensor_adam")
    [diagnostic] = _diagnostics(single)
    assert "pass fused=True (or foreach=True) to torch.optim.Adam" in diagnostic.message
    # nothing to pass: the fused kernel itself, autograd's engine
    for other in (
        _entry(qualname="_fused_adam"),
        _entry(path=ADAM.replace("optim/adam.py", "autograd/graph.py"), qualname="_engine_run"),
    ):
        [diagnostic] = _diagnostics(other)
        assert diagnostic.severity == types.DiagnosticSeverity.Information, other["qualname"]
        assert "in torch's own code: nothing in the project changes it" in diagnostic.message


def test_a_library_finding_under_1_percent_of_the_step_is_information():
    entry = copy.deepcopy(llama_result())
    rules.attach(entry)
    [naive] = [f for f in entry["library_findings"] if f["code"] == "TRN001"]
    [big] = _diagnostics(naive)
    assert big.severity == types.DiagnosticSeverity.Warning and naive["share"] >= 0.01
    [small] = _diagnostics({**naive, "share": 0.004})
    assert small.severity == types.DiagnosticSeverity.Information


def test_a_measured_finding_under_1_percent_of_the_step_is_information():
    sync = {**FINDING, "id": "host-sync", "message": "host sync: aten::item 42x per step",
            "time_us": 0.4, "share": 0.0004}  # fmt: skip
    doc = _doc()
    result = _result()
    result.data["findings"] = [sync, {**FINDING, "line": 7}]
    doc.place(Result(result.data))
    found = {d.code: d for d in run_findings.provider(doc, resolve({}))}
    assert found["host-sync"].severity == types.DiagnosticSeverity.Information
    assert "under 0.1% of the step" in found["host-sync"].message  # was "0% of the step"
    assert found["launch-bound"].severity == types.DiagnosticSeverity.Warning  # 25%
