"""TRN006: hand-written attention, look-alikes, and the SDPA fix under real torch."""

from __future__ import annotations

import pytest
import torch

from .helpers import DTYPES, assert_bf16_rounding_only, findings, fixed, load, random

HEADER = "import math\nimport torch\nimport torch.nn.functional as F\n\n"

POSITIVE = {
    "div_sqrt_masked_fill": (
        "def f(q, k, v, mask):\n"
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"
        "    scores = scores.masked_fill(mask == 0, float('-inf'))\n"
        "    attn = F.softmax(scores, dim=-1)\n"
        "    return attn @ v\n"
    ),
    "matmul_scale_attr_additive": (
        "def f(q, k, v, mask):\n"
        "    scale = q.shape[-1] ** -0.5\n"
        "    w = torch.matmul(q, k.transpose(-1, -2)) * scale\n"
        "    w = w + mask.to(q.dtype).log()\n"
        "    return torch.matmul(w.softmax(dim=-1), v)\n"
    ),
    "inline_no_mask": (
        "def f(q, k, v, mask):\n    return torch.softmax(q @ k.mT / 8.0, dim=-1) @ v\n"
    ),
}
NEGATIVE = {
    "weights_returned": (
        "def f(q, k, v):\n"
        "    attn = torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1)\n"
        "    return attn @ v, attn\n"
    ),
    "dropout_between": (
        "def f(q, k, v):\n"
        "    attn = torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1)\n"
        "    return F.dropout(attn, 0.1) @ v\n"
    ),
    "softmax_other_dim": "def f(q, k, v):\n    return torch.softmax(q @ k.mT / 8.0, dim=1) @ v\n",
    "no_transpose": "def f(q, k, v):\n    return torch.softmax(q @ k / 8.0, dim=-1) @ v\n",
    "tensor_scale": (
        "def f(q, k, v, t):\n    return torch.softmax(q @ k.mT * torch.exp(t), dim=-1) @ v\n"
    ),
    "sdpa": "def f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n",
}


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_flagged_with_a_fix(name: str) -> None:
    (finding,) = findings(HEADER + POSITIVE[name], "TRN006")
    assert finding.fix is not None
    assert finding.naive_dispatches is not None and finding.naive_dispatches >= 4


def test_weights_used_elsewhere_flagged_without_fix() -> None:
    (finding,) = findings(HEADER + NEGATIVE["weights_returned"], "TRN006")
    assert finding.fix is None


@pytest.mark.parametrize("name", sorted(set(NEGATIVE) - {"weights_returned"}))
def test_look_alikes_not_flagged(name: str) -> None:
    assert findings(HEADER + NEGATIVE[name], "TRN006") == []


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_fix_is_numerically_equivalent(name: str, dtype: torch.dtype) -> None:
    source = HEADER + POSITIVE[name]
    out = fixed(source, "TRN006")
    assert "scaled_dot_product_attention" in out and "softmax" not in out.split("def f")[1]
    q, k, v = (random(2, 4, 16, 64, dtype=dtype, seed=s) for s in (1, 2, 3))
    mask = torch.rand(16, 16, generator=torch.Generator().manual_seed(4)) > 0.3
    mask |= torch.eye(16, dtype=torch.bool)  # every query attends somewhere
    original, replacement = load(source, "f"), load(out, "f")
    if dtype == torch.bfloat16:
        # The naive chain rounds the scores and the probabilities to bfloat16; SDPA accumulates
        # in float32. Measured worst case over these inputs: |fused - naive| = 0.015625
        # (inline_no_mask; 0.0078125 for the other two).
        assert_bf16_rounding_only(original, replacement, (q, k, v, mask), bound=0.015625)
        return
    with torch.no_grad():
        torch.testing.assert_close(replacement(q, k, v, mask), original(q, k, v, mask))
