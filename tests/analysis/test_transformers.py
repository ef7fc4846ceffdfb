"""TRN001 on real model code: transformers' modeling files, read as text and never imported."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
from collections import Counter
from functools import cache

import pytest
import torch
from trnlens.analysis import analyse_source, apply_fixes

from .helpers import DTYPES, random

VERSION = "4.57.6"  # pinned in pyproject's dev extras

# Hand-written RMSNorms TRN001 finds in transformers 4.57.6 (the PyTorch modeling files): one in
# each of 110 classes or functions. Named *RMSNorm, plus T5-family *LayerNorm classes (RMSNorm
# by another name), Llama4TextL2Norm (a mean, not a sum: an RMSNorm without weight), Reformer's
# _len_norm and falcon_mamba's rms_forward. Not found, rightly: the Flax and TF ports (not torch)
# and MegaRMSNorm, whose forward discards the normalised value.
EXPECTED_FINDINGS = 110


@cache
def modeling_files() -> dict[str, str]:
    try:
        dist = importlib.metadata.distribution("transformers")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("transformers is a dev dependency: pip install -e '.[dev]'")
    assert dist.version == VERSION
    files = {}
    for f in dist.files or []:
        name = str(f)
        if name.startswith("transformers/models/") and f.name.startswith("modeling_"):
            if name.endswith(".py"):
                files[name] = dist.locate_file(f).read_text(encoding="utf-8")
    return files


@cache
def rmsnorm_findings() -> dict[tuple[str, str], list]:
    found: dict[tuple[str, str], list] = {}
    for name, text in sorted(modeling_files().items()):
        for f in analyse_source(text, name, select=["TRN001"]):
            found.setdefault((name, f.qualname), []).append(f)
    return found


def test_transformers_is_read_not_imported(monkeypatch) -> None:
    # Another test may have imported transformers in this process (the agent's in-process runs
    # of a tiny Llama): None in sys.modules makes any import of it here raise instead.
    monkeypatch.setitem(sys.modules, "transformers", None)
    modeling_files.cache_clear()
    files = modeling_files()
    assert sum(len(analyse_source(text, name, select=["TRN001"])) for name, text in files.items())
    assert sys.modules["transformers"] is None


def test_finds_the_expected_number_of_hand_written_rmsnorms() -> None:
    found = rmsnorm_findings()
    assert sum(len(v) for v in found.values()) == EXPECTED_FINDINGS
    owners = Counter((name, q.split(".")[0]) for (name, q) in found)
    assert set(owners.values()) == {1}  # one normalisation per class, found once


@pytest.mark.parametrize(
    ("module", "qualname"),
    [
        ("llama/modeling_llama.py", "LlamaRMSNorm.forward"),
        ("mistral/modeling_mistral.py", "MistralRMSNorm.forward"),
        ("qwen2/modeling_qwen2.py", "Qwen2RMSNorm.forward"),
        ("qwen3/modeling_qwen3.py", "Qwen3RMSNorm.forward"),
        ("gemma/modeling_gemma.py", "GemmaRMSNorm._norm"),
        ("gemma3/modeling_gemma3.py", "Gemma3RMSNorm._norm"),
        ("t5/modeling_t5.py", "T5LayerNorm.forward"),
        ("mixtral/modeling_mixtral.py", "MixtralRMSNorm.forward"),
        ("phi3/modeling_phi3.py", "Phi3RMSNorm.forward"),
        ("olmo2/modeling_olmo2.py", "Olmo2RMSNorm.forward"),
    ],
)
def test_finds_the_well_known_ones(module: str, qualname: str) -> None:
    assert (f"transformers/models/{module}", qualname) in rmsnorm_findings()


def test_nothing_named_layernorm_is_flagged_unless_it_is_an_rmsnorm() -> None:
    # Every flagged *LayerNorm must be T5-style (no mean subtraction); LayerNorm proper is TRN002.
    for (name, qualname), _ in rmsnorm_findings().items():
        owner = qualname.split(".")[0]
        if "LayerNorm" in owner:
            source = _class_source(modeling_files()[name], owner)
            assert " - " not in source.split("def forward", 1)[1].split("return", 1)[0], owner


def _class_source(text: str, cls: str) -> str:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return ast.get_source_segment(text, node) or ""
    raise KeyError(cls)


SAMPLE = [
    ("llama/modeling_llama.py", "LlamaRMSNorm"),
    ("gemma/modeling_gemma.py", "GemmaRMSNorm"),
    ("t5/modeling_t5.py", "T5LayerNorm"),
    ("qwen3/modeling_qwen3.py", "Qwen3RMSNorm"),
    ("mistral/modeling_mistral.py", "MistralRMSNorm"),
    ("qwen3_next/modeling_qwen3_next.py", "Qwen3NextRMSNorm"),
    ("mamba2/modeling_mamba2.py", "MambaRMSNormGated"),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("module", "cls"), SAMPLE)
def test_fixed_classes_keep_their_outputs(module: str, cls: str, dtype: torch.dtype) -> None:
    text = modeling_files()[f"transformers/models/{module}"]
    fixed_text = apply_fixes(text, analyse_source(text, module, select=["TRN001"]))
    assert fixed_text != text
    assert not [f for f in analyse_source(fixed_text, module) if f.code == "TRN001"]
    original = _build(_class_source(text, cls), cls)
    fixed = _build(_class_source(fixed_text, cls), cls)
    fixed.load_state_dict(original.state_dict())
    original, fixed = original.to(dtype), fixed.to(dtype)
    x = random(2, 7, 64, dtype=dtype)
    extra = (random(2, 7, 64, dtype=dtype, seed=5),) if "Gated" in cls else ()
    with torch.no_grad():
        want, got = original(x, *extra), fixed(x, *extra)
    torch.testing.assert_close(got, want)


def _build(class_source: str, cls: str) -> torch.nn.Module:
    """Exec the class alone (decorators dropped) with torch and nn in its globals."""
    body = class_source[class_source.index("class ") :]
    ns = {"torch": torch, "nn": torch.nn}
    exec(compile(body, f"<{cls}>", "exec"), ns)
    module = ns[cls](64)
    torch.manual_seed(2)
    for p in module.parameters():
        p.data.copy_(torch.randn_like(p))
    return module
