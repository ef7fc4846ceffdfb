"""TRN002: hand-written LayerNorm, its look-alikes, and its fix under real torch."""

from __future__ import annotations

import pytest
import torch

from .helpers import DTYPES, assert_bf16_rounding_only, findings, fixed, load, random

HEADER = "import torch\nimport torch.nn.functional as F\n\n"

POSITIVE = {
    "locals_var_unbiased_false": (
        "def f(x, w, b, eps=1e-5):\n"
        "    mu = x.mean(-1, keepdim=True)\n"
        "    var = x.var(-1, keepdim=True, unbiased=False)\n"
        "    return (x - mu) / torch.sqrt(var + eps) * w + b\n"
    ),
    "centred_squared_mean": (
        "def f(x, w, b):\n"
        "    xc = x - x.mean(dim=-1, keepdim=True)\n"
        "    var = (xc ** 2).mean(dim=-1, keepdim=True)\n"
        "    return xc * torch.rsqrt(var + 1e-5)\n"
    ),
    "correction_zero": (
        "def f(x, w, b):\n"
        "    mean = x.mean(-1, keepdim=True)\n"
        "    var = x.var(-1, keepdim=True, correction=0)\n"
        "    y = (x - mean) / (var + 1e-6).sqrt()\n"
        "    return y * w + b\n"
    ),
    "inline_twice": (
        "def f(x, w, b):\n"
        "    mu = x.mean(-1, keepdim=True)\n"
        "    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + 1e-5)\n"
    ),
}

NEGATIVE = {
    "unbiased_var": (
        "def f(x):\n"
        "    mu = x.mean(-1, keepdim=True)\n"
        "    return (x - mu) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5)\n"
    ),
    "rmsnorm": "def f(x):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)\n",
    "fused": "def f(x):\n    return F.layer_norm(x, x.shape[-1:])\n",
    "mean_of_other_tensor": (
        "def f(x, y):\n"
        "    v = x.var(-1, keepdim=True, unbiased=False)\n"
        "    return (x - y.mean(-1, keepdim=True)) / torch.sqrt(v + 1e-5)\n"
    ),
    "std_normalise_no_eps": (
        "def f(x):\n    return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True)\n"
    ),
}


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_flagged_as_layernorm_not_rmsnorm(name: str) -> None:
    source = HEADER + POSITIVE[name]
    (finding,) = findings(source, "TRN002")
    assert findings(source, "TRN001") == []
    assert finding.message.startswith(f"naive LayerNorm: {finding.naive_dispatches} separate")
    assert finding.naive_dispatches is not None and finding.naive_dispatches >= 5


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_look_alikes_not_flagged(name: str) -> None:
    assert findings(HEADER + NEGATIVE[name], "TRN002") == []


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_fix_is_numerically_equivalent(name: str, dtype: torch.dtype) -> None:
    source = HEADER + POSITIVE[name]
    out = fixed(source, "TRN002")
    assert "layer_norm" in out and ".mean(" not in out.split("def f")[1]
    x = random(4, 8, 64, dtype=dtype) * 3 + 1
    w, b = random(64, dtype=dtype, seed=1), random(64, dtype=dtype, seed=2)
    original, replacement = load(source, "f"), load(out, "f")
    if dtype == torch.bfloat16:
        # The naive chain rounds the mean, the centred copy and the variance to bfloat16; the
        # fused kernel accumulates in float32. Measured worst case over these inputs:
        # |fused - naive| = 0.0625 (2 bf16 ulps at |y| in [4, 8)), 0.015625 for two forms.
        assert_bf16_rounding_only(original, replacement, (x, w, b), bound=0.0625)
        return
    with torch.no_grad():
        torch.testing.assert_close(replacement(x, w, b), original(x, w, b))
