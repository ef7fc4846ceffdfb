"""TRN004 hand-written GELU and TRN005 hand-written SiLU / SwiGLU gate, and their fixes."""

from __future__ import annotations

import pytest
import torch

from .helpers import DTYPES, assert_bf16_rounding_only, findings, fixed, load, random

HEADER = "import math\nimport torch\nimport torch.nn.functional as F\n\n"

GELU = {
    "erf_math_sqrt": "def f(x, u):\n    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))\n",
    "erf_literal_mult": (
        "def f(x, u):\n    return x * 0.5 * (1.0 + torch.erf(x * 0.7071067811865476))\n"
    ),
    "tanh_pow": (
        "def f(x, u):\n"
        "    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * "
        "(x + 0.044715 * torch.pow(x, 3))))\n"
    ),
    "tanh_cube_literal": (
        "def f(x, u):\n"
        "    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))\n"
    ),
}
SILU = {
    "sigmoid": "def f(x, u):\n    return x * torch.sigmoid(x)\n",
    "sigmoid_method_first": "def f(x, u):\n    return x.sigmoid() * x\n",
    "exp_form": "def f(x, u):\n    return x / (1 + torch.exp(-x))\n",
    "swiglu": "def f(x, u):\n    return x * torch.sigmoid(x) * u\n",
}
NEGATIVE = {
    "gelu_wrong_constant": "def f(x):\n    return 0.5 * x * (1 + torch.erf(x / math.sqrt(3)))\n",
    "gelu_other_tensor": "def f(x, y):\n    return 0.5 * x * (1 + torch.erf(y / math.sqrt(2)))\n",
    "sigmoid_gate_other_tensor": "def f(x, g):\n    return x * torch.sigmoid(g)\n",
    "builtins": "def f(x):\n    return F.gelu(x) + F.silu(x)\n",
    "tanh_without_cubic": (
        "def f(x):\n    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * x))\n"
    ),
}
CASES = {
    **{k: ("TRN004", v) for k, v in GELU.items()},
    **{k: ("TRN005", v) for k, v in SILU.items()},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_flagged(name: str) -> None:
    code, body = CASES[name]
    (finding,) = findings(HEADER + body)
    assert finding.code == code
    assert finding.naive_dispatches is not None and finding.naive_dispatches >= 2
    if name == "swiglu":
        assert "SwiGLU" in finding.message


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_look_alikes_not_flagged(name: str) -> None:
    assert findings(HEADER + NEGATIVE[name], select=["TRN004", "TRN005"]) == []


def test_tanh_form_gets_the_tanh_approximation() -> None:
    out = fixed(HEADER + GELU["tanh_pow"], "TRN004")
    assert 'torch.nn.functional.gelu(x, approximate="tanh")' in out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_fix_is_numerically_equivalent(name: str, dtype: torch.dtype) -> None:
    code, body = CASES[name]
    source = HEADER + body
    out = fixed(source, code)
    x, u = random(4, 256, dtype=dtype) * 3, random(4, 256, dtype=dtype, seed=1)
    original, replacement = load(source, "f"), load(out, "f")
    if dtype == torch.bfloat16 and code == "TRN004":
        # The naive GELU rounds erf/tanh and each product to bfloat16. Measured worst case over
        # these inputs: |fused - naive| = 0.015625 (1 bf16 ulp at |y| in [2, 4)).
        assert_bf16_rounding_only(original, replacement, (x, u), bound=0.015625)
        return
    with torch.no_grad():
        torch.testing.assert_close(replacement(x, u), original(x, u))
