"""The static rules on the library code a run executed: joined with the run's measured cost."""

from __future__ import annotations

import copy
import sys

from trnlens.libraries import rules

from tests.libraries.fixtures import CALLER, NORMS, TYPE_PATH, llama_result, without_frames_inside


def test_naive_rmsnorm_in_transformers_with_its_measured_cost(monkeypatch) -> None:
    # read as text, never imported: with None in sys.modules an import of transformers raises
    # (another test may have imported it in this process already)
    monkeypatch.setitem(sys.modules, "transformers", None)
    result = llama_result()
    rules.attach(result)
    found = [f for f in result["library_findings"] if f["code"] == "TRN001"]
    assert len(found) == 1
    finding = found[0]
    assert finding["message"] == (
        "LlamaRMSNorm (transformers 4.57.6, modeling_llama.py:62) is a naive RMSNorm: "
        "8 dispatches a call, 5 calls, 40 of 151 per step"
    )
    assert finding["path"].endswith("transformers/models/llama/modeling_llama.py")
    assert finding["line"] == 66 and finding["def_line"] == 62
    assert finding["qualname"] == "LlamaRMSNorm.forward"
    assert finding["calls_per_step"] == 5 and finding["dispatches_per_step"] == 40
    assert finding["module_names"] == NORMS
    assert finding["callers"] == [{**CALLER, "dispatches_per_step": 40.0}]
    assert finding["time_per_step_us"] == 800.0
    assert finding["fix"]["kind"] == "module-swap"
    assert finding["fix"]["type_path"] == TYPE_PATH and finding["fix"]["method"] == "forward"
    assert "torch.rms_norm(" in finding["fix"]["source"]
    assert sys.modules["transformers"] is None  # read as text, never imported


def test_modules_stand_in_when_the_lines_fell_out_of_the_top_frames() -> None:
    result = without_frames_inside(llama_result())
    rules.attach(result)
    (finding,) = [f for f in result["library_findings"] if f["code"] == "TRN001"]
    assert finding["dispatches_per_step"] == 40 and finding["calls_per_step"] == 5
    assert finding["callers"] == [{**CALLER, "dispatches_per_step": 40.0}]


def test_a_finding_in_code_that_did_not_run_is_not_reported() -> None:
    result = llama_result()
    result["frames"] = [f for f in result["frames"] if "modeling_llama" not in f["path"]]
    result["modules"] = [m for m in result["modules"] if m["type"] != "LlamaRMSNorm"]
    rules.attach(result)
    assert not [f for f in result["library_findings"] if f["code"] == "TRN001"]


def test_project_frames_and_unreadable_files_are_skipped(tmp_path) -> None:
    result = llama_result(str(tmp_path / "gone" / "modeling_llama.py"))
    rules.attach(result)
    assert result["library_findings"] == []


def test_a_run_without_attribution_gets_nothing() -> None:
    result = llama_result()
    del result["frames"], result["modules"]
    rules.attach(result)
    assert "library_findings" not in result
    failed = copy.deepcopy(llama_result())
    failed["error"] = {"kind": "user_code"}
    rules.attach(failed)
    assert "library_findings" not in failed


def test_each_file_is_analysed_once_per_content(tmp_path, monkeypatch) -> None:
    library = tmp_path / "lib.py"
    library.write_text(
        "import torch\n\n\nclass Norm(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
    )
    calls = []
    real = rules.analyse_source
    monkeypatch.setattr(rules, "analyse_source", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert len(rules.analysed_file(str(library)).findings) == 1
    assert len(rules.analysed_file(str(library)).findings) == 1
    assert len(calls) == 1
    library.write_text(library.read_text() + "\n# changed\n")
    rules.analysed_file(str(library))
    assert len(calls) == 2


def test_modules_do_not_stand_in_when_no_frame_was_cut() -> None:
    # Every frame is there and none is in the norm's lines: its code did not run (say, a run
    # whose forward was replaced), however many LlamaRMSNorm modules were called.
    result = without_frames_inside(llama_result())
    result["frames_rest"]["count"] = 0
    rules.attach(result)
    assert not [f for f in result["library_findings"] if f["code"] == "TRN001"]


def test_a_swap_run_does_not_report_the_method_it_swapped() -> None:
    result = without_frames_inside(llama_result())
    result["variant"] = {"label": "x", "kind": "swap", "source_hash": None,
                         "swaps": [{"type_path": TYPE_PATH, "method": "forward"}]}  # fmt: skip
    rules.attach(result)
    assert not [f for f in result["library_findings"] if f["code"] == "TRN001"]
