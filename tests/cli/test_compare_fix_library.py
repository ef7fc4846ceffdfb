"""`trnlens compare --fix` on a project function whose run found fixable library code: the tiny
Llama measured as it is, with transformers' LlamaRMSNorm.forward swapped for the analysis' fix
(on the run's instances; the library untouched), and compiled; outputs equal in fp32 and bf16.

The stored run that names the library finding is the hand-written attribution result of
tests/libraries/fixtures.py passed through the real ``libraries.rules.attach``."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from pathlib import Path

import jsonschema
import pytest
from trnlens.agent import sources
from trnlens.libraries import rules
from trnlens.results import schema
from trnlens.store import Store

from tests.cli.conftest import trnlens
from tests.libraries.fixtures import TYPE_PATH, llama_result, modeling_llama

FAST = ("--warmup", "1", "--steps", "2", "--repeats", "3", "--format", "json", "--quiet")
SPEC = "samples/tiny_llama.py::logits"


def _store_a_run(root: Path) -> None:
    text = (root / "samples" / "tiny_llama.py").read_text("utf-8")
    result = llama_result()
    result["function"]["source_hash"] = sources.source_hash(
        text, sources.find_definition(text, "logits")
    )
    rules.attach(result)
    with Store(root) as store:
        store.add(result)


def _library_digest() -> str:
    return hashlib.sha256(Path(modeling_llama()).read_bytes()).hexdigest()


# float32 after a real run: tests/cli/test_profile_library.py.
@pytest.mark.parametrize("inputs", ["llama_inputs_bf16"])
def test_compare_fix_measures_the_library_module_swap(samples, inputs):
    before = _library_digest()
    _store_a_run(samples)
    done = trnlens("compare", "--fix", SPEC, "--inputs", inputs, *FAST, cwd=samples, timeout=900)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    jsonschema.validate(outcome, schema())
    variants = outcome["variants"]
    assert [v["variant"]["kind"] for v in variants] == ["function", "swap", "compiled"]
    assert variants[1]["variant"]["label"] == "logits (fixed: TRN001 in LlamaRMSNorm)"
    assert variants[1]["variant"]["swaps"] == [{"type_path": TYPE_PATH, "method": "forward"}]
    assert variants[1]["variant"]["swapped_instances"] == 5
    # 5 norm calls, each 8 dispatches naive and 4 swapped (to, rms_norm, to, mul).
    assert variants[0]["dispatches_per_step"] - variants[1]["dispatches_per_step"] == 20
    assert outcome["max_abs_diff"][1] == 0.0  # the swap: exactly the same outputs
    # The medians the table shows and the speed-ups are the same rounds' (the swapped variant's
    # rounds run its swap): they never point opposite ways.
    base = variants[0]["timing"]["median_us"]
    for variant, factor in zip(variants[1:], outcome["speedups"][1:], strict=True):
        assert factor == pytest.approx(base / variant["timing"]["median_us"])
    assert outcome["max_abs_diff"][2] is not None  # compiled: reported, not claimed equal
    assert _library_digest() == before  # the library file untouched
    version = importlib.metadata.version("transformers")
    assert version == "4.57.6"


def test_compare_fix_without_a_run_says_to_profile_first(samples):
    done = trnlens("compare", "--fix", SPEC, cwd=samples)
    assert done.returncode == 2
    assert "the analysis has no fix for logits in samples/tiny_llama.py" in done.stderr
    assert "a run (trnlens profile samples/tiny_llama.py::logits) finds those" in done.stderr
    assert not (samples / ".trnlens").exists()
