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
    # T5: no scale (folded into the query projection's initialisation), a position bias added.
    "unscaled": (
        "def f(q, k, v, mask):\n"
        "    scores = torch.matmul(q, k.transpose(-2, -1))\n"
        "    attn = F.softmax(scores, dim=-1)\n"
        "    return torch.matmul(attn, v)\n"
    ),
    "unscaled_position_bias": (
        "def f(q, k, v, mask):\n"
        "    position_bias = (mask.to(q.dtype) - 1.0) * 3.0\n"
        "    scores = torch.matmul(q, k.transpose(-1, -2))\n"
        "    scores = scores + position_bias\n"
        "    return torch.matmul(F.softmax(scores, dim=-1), v)\n"
    ),
}
# |fused - naive| in bfloat16, the worst measured over the inputs of the test below.
BF16_BOUND = {
    "div_sqrt_masked_fill": 0.0078125,
    "matmul_scale_attr_additive": 0.0078125,
    "inline_no_mask": 0.015625,
    "unscaled": 0.0703125,
    "unscaled_position_bias": 0.0390625,
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
    # timm's fallback for ONNX export (timm/models/hiera.py:337): the fused op is used already.
    "fallback_of_sdpa": (
        "def f(self, q, k, v):\n"
        "    if self.fused_attn:\n"
        "        x = F.scaled_dot_product_attention(q, k, v)\n"
        "    else:\n"
        "        attn = (q * self.scale) @ k.transpose(-1, -2)\n"
        "        x = attn.softmax(dim=-1) @ v\n"
        "    return x\n"
    ),
    "unscaled_no_transpose": "def f(q, k, v):\n    return torch.softmax(q @ k, dim=-1) @ v\n",
    # transformers' T5 spells it `transpose(3, 2)`: the last two dims only for a 4-D key,
    # which the code does not show (for a 5-D one SDPA would compute something else).
    "unscaled_positive_dims": (
        "def f(q, k, v):\n"
        "    return torch.softmax(torch.matmul(q, k.transpose(3, 2)), dim=-1) @ v\n"
    ),
}


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_flagged_with_a_fix(name: str) -> None:
    (finding,) = findings(HEADER + POSITIVE[name], "TRN006")
    assert finding.fix is not None
    assert finding.naive_dispatches is not None and finding.naive_dispatches >= 4


def test_unscaled_scores_keep_their_scale_of_one() -> None:
    (finding,) = findings(HEADER + POSITIVE["unscaled"], "TRN006")
    assert "scale=1.0 keeps that" in finding.message
    assert "scale=1.0)" in fixed(HEADER + POSITIVE["unscaled"], "TRN006")


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
        # in float32. Measured worst case over these inputs: BF16_BOUND. Unscaled scores are 8x
        # larger here (head size 64), so rounding them moves the naive result most (0.072 from
        # the float64 result, against 0.0077 for SDPA).
        assert_bf16_rounding_only(original, replacement, (q, k, v, mask), BF16_BOUND[name])
        return
    with torch.no_grad():
        torch.testing.assert_close(replacement(q, k, v, mask), original(q, k, v, mask))
