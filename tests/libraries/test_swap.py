"""Module swaps: compare --fix's variants, and the helper the quick fix writes (run here on the
tiny Llama sample: the library's forward swapped, the same outputs in float32 and bfloat16)."""

from __future__ import annotations

import copy
import types as pytypes

import pytest
import torch
from trnlens.fixvariants import NoFix
from trnlens.libraries import rules, swap
from trnlens.lsp import library

from tests.cli.conftest import REPO
from tests.libraries.fixtures import TYPE_PATH, llama_result


def _run() -> dict:
    result = llama_result()
    rules.attach(result)
    return result


def test_swap_variants_measure_the_original_each_swap_and_the_compiled() -> None:
    variants = swap.swap_variants("p.py", "logits", _run())
    assert [v["label"] for v in variants] == [
        "logits", "logits (fixed: TRN001 in LlamaRMSNorm)", "logits (compiled)",
    ]  # fmt: skip
    (module_swap,) = variants[1]["module_swaps"]
    assert module_swap["type_path"] == TYPE_PATH and module_swap["method"] == "forward"
    assert "torch.rms_norm(" in module_swap["source"]
    assert variants[2]["compile"] is True


def test_no_run_or_no_fixable_library_code_is_no_fix() -> None:
    with pytest.raises(NoFix, match="the analysis has no fix for logits"):
        swap.swap_variants("p.py", "logits", None)
    run = _run()
    for entry in run["library_findings"]:
        entry["fix"] = None
    with pytest.raises(NoFix):
        swap.swap_variants("p.py", "logits", run)


def test_a_library_changed_since_the_run_is_not_patched(tmp_path) -> None:
    run = _run()
    entry = next(e for e in run["library_findings"] if e["code"] == "TRN001")
    moved = copy.deepcopy(entry)
    moved["path"] = str(tmp_path / "modeling_llama.py")  # gone: the fix cannot be re-derived
    assert swap.current_fix(moved) is None
    assert swap.current_fix(entry).variant_source == entry["fix"]["source"]


def _apply(text: str, edits) -> str:
    lines = text.splitlines(keepends=True)

    def offset(pos) -> int:
        return sum(len(line) for line in lines[: pos.line]) + pos.character  # ASCII sample

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        start, end = offset(edit.range.start), offset(edit.range.end)
        text = text[:start] + edit.new_text + text[end:]
    return text


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_the_quick_fix_helper_swaps_the_norms_with_the_same_outputs(dtype) -> None:
    text = (REPO / "samples" / "tiny_llama.py").read_text("utf-8")
    entry = next(e for e in _run()["library_findings"] if e["code"] == "TRN001")
    edits = library.swap_edits(text, entry, ["LlamaForCausalLM"])
    assert edits is not None
    fixed = _apply(text, edits)
    assert "model = use_fused_llama_rms_norm(LlamaForCausalLM(config))" in fixed
    assert library.swap_edits(fixed, entry, ["LlamaForCausalLM"]) is None  # applied once
    original_ns = _exec(text)
    fixed_ns = _exec(fixed)
    model = original_ns["build_model"](dtype)
    swapped = fixed_ns["build_model"](dtype)
    norms = [m for m in swapped.modules() if type(m).__name__ == "LlamaRMSNorm"]
    assert len(norms) == 5 and all("forward" in m.__dict__ for m in norms)
    ids = torch.randint(0, 1000, (1, 32))
    with torch.inference_mode():
        assert torch.equal(model(ids).logits, swapped(ids).logits)
    assert not any("forward" in m.__dict__ for m in model.modules())  # the class is untouched


def _exec(text: str) -> dict:
    module = pytypes.ModuleType("tiny_llama_under_test")
    exec(compile(text, "tiny_llama_under_test.py", "exec"), module.__dict__)
    return module.__dict__
