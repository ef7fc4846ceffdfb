"""A real run of the tiny random-weight Llama (transformers 4.57.6, built from a config): the
static rules on the library code it executed find transformers' naive LlamaRMSNorm, at its line
in modeling_llama.py and on the project line that called it, with the measured cost; then
``compare --fix`` on the same function measures the module swap that run found."""

from __future__ import annotations

import json

import jsonschema
from trnlens.results import schema

from tests.cli.conftest import trnlens

FAST = ("--warmup", "1", "--steps", "2", "--repeats", "3", "--quiet")
SPEC = "samples/tiny_llama.py::logits"


def test_the_naive_rmsnorm_in_transformers_is_found_on_the_calling_line(samples):
    done = trnlens("profile", SPEC, *FAST, "--format", "json", cwd=samples)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    jsonschema.validate(result, schema())
    (finding,) = [f for f in result["library_findings"] if f["code"] == "TRN001"]
    total = result["dispatches_per_step"]
    assert finding["message"] == (
        "LlamaRMSNorm (transformers 4.57.6, modeling_llama.py:62) is a naive RMSNorm: "
        f"8 dispatches a call, 5 calls, 40 of {total:g} per step"
    )
    assert finding["path"].endswith("/transformers/models/llama/modeling_llama.py")
    assert finding["line"] == 66 and finding["qualname"] == "LlamaRMSNorm.forward"
    assert finding["callers"] == [
        {"path": "samples/tiny_llama.py", "line": 34, "dispatches_per_step": 40.0}
    ]
    assert len(finding["module_names"]) == 5
    assert all(name.endswith("norm") for name in finding["module_names"])
    assert finding["fix"]["type_path"] == "transformers.models.llama.modeling_llama.LlamaRMSNorm"

    table = trnlens("profile", SPEC, *FAST, cwd=samples)
    assert table.returncode == 0, table.stderr
    assert "Library findings (static rules on the library code this run executed" in table.stdout
    assert "  TRN001 LlamaRMSNorm (transformers 4.57.6, modeling_llama.py:62)" in table.stdout
    assert "    called from samples/tiny_llama.py:34" in table.stdout

    # The stored run names the fixable library code: compare --fix measures the swap.
    done = trnlens("compare", "--fix", SPEC, *FAST, "--format", "json", cwd=samples, timeout=900)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    kinds = [v["variant"]["kind"] for v in outcome["variants"]]
    assert kinds == ["function", "swap", "compiled"]
    original, swapped = outcome["variants"][:2]
    assert original["dispatches_per_step"] - swapped["dispatches_per_step"] == 20
    assert outcome["max_abs_diff"][1] == 0.0
    # The swapped run's own attribution: the norms no longer run the naive pattern.
    assert not [f for f in swapped.get("library_findings") or [] if f["code"] == "TRN001"]
