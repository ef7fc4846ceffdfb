"""TRN001: naive RMSNorm in the forms real model code uses, its look-alikes, and its fix."""

from __future__ import annotations

import pytest
import torch

from .helpers import DTYPES, findings, fixed, load, module_pair, random

D = 64
HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"

LLAMA = """
class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)
"""

GEMMA = """
class GemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)
"""

T5 = """
class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states
"""

LLAMA, GEMMA, T5 = (HEADER + s for s in (LLAMA, GEMMA, T5))
MODULES = {
    "llama": (LLAMA, "LlamaRMSNorm"),
    "gemma": (GEMMA, "GemmaRMSNorm"),
    "t5": (T5, "T5LayerNorm"),
}

# Plain functions ``f(x, w)``; each is a naive RMSNorm written another way.
FUNCTIONS = {
    "pow_rsqrt": (
        "def f(x, w):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
    ),
    "starstar_dim_kw": (
        "def f(x, w, eps=1e-5):\n"
        "    return x * torch.rsqrt((x ** 2).mean(dim=-1, keepdim=True) + eps)\n"
    ),
    "square_fn": (
        "def f(x, w):\n    return torch.rsqrt(torch.square(x).mean(-1, keepdim=True) + 1e-6) * x\n"
    ),
    "x_times_x": (
        "def f(x, w):\n    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)\n"
    ),
    "torch_mean": (
        "def f(x, w):\n"
        "    return x * torch.rsqrt(torch.mean(x.pow(2), dim=-1, keepdim=True) + 1e-6)\n"
    ),
    "div_sqrt": "def f(x, w):\n    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n",
    "div_method_sqrt": (
        "def f(x, w):\n    return x / (x.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt()\n"
    ),
    "pow_minus_half": (
        "def f(x, w):\n    return x * (x.pow(2).mean(-1, keepdim=True) + 1e-6) ** -0.5\n"
    ),
    "weight_after": (
        "def f(x, w):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w\n"
    ),
    "weight_before": (
        "def f(x, w):\n    return w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
    ),
    "locals_chain": (
        "def f(x, w, eps=1e-6):\n"
        "    sq = x.pow(2)\n"
        "    ms = sq.mean(-1, keepdim=True)\n"
        "    inv = torch.rsqrt(ms + eps)\n"
        "    out = x * inv\n"
        "    return out * w\n"
    ),
    "upcast_cast_back": (
        "def f(x, w):\n"
        "    dtype = x.dtype\n"
        "    x = x.float()\n"
        "    var = x.pow(2).mean(-1, keepdim=True)\n"
        "    x = x * torch.rsqrt(var + 1e-6)\n"
        "    return (w * x).to(dtype)\n"
    ),
    "gemma_folded": (
        "def f(x, w):\n"
        "    h = x.float()\n"
        "    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + w.float())\n"
        "    return out.type_as(x)\n"
    ),
}

NOT_RMSNORM = {
    "l2_norm": "def f(x):\n    return x / x.norm(dim=-1, keepdim=True)\n",
    "f_normalize": "def f(x):\n    return F.normalize(x, dim=-1)\n",
    "l2_via_sum": "def f(x):\n    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6)\n",
    "layernorm": (
        "def f(x):\n"
        "    xc = x - x.mean(-1, keepdim=True)\n"
        "    return xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + 1e-5)\n"
    ),
    "fused_already": "def f(x, w):\n    return F.rms_norm(x, x.shape[-1:], w, 1e-6)\n",
    "other_tensor": (
        "def f(x, y):\n    return y * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
    ),
    "mean_dim0": "def f(x):\n    return x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + 1e-6)\n",
    "no_keepdim": "def f(x):\n    return x * torch.rsqrt(x.pow(2).mean(-1) + 1e-6)\n",
    "eps_outside_sqrt": (
        "def f(x):\n    return x / (torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + 1e-6)\n"
    ),
    "cube": "def f(x):\n    return x * torch.rsqrt(x.pow(3).mean(-1, keepdim=True) + 1e-6)\n",
    "reassigned_in_branch": (
        "def f(x, flag):\n"
        "    v = x.pow(2).mean(-1, keepdim=True)\n"
        "    if flag:\n"
        "        x = x * 2\n"
        "    return x * torch.rsqrt(v + 1e-6)\n"
    ),
    "tensor_eps": (
        "def f(x, e):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e.abs())\n"
    ),
}


FUNCTIONS = {k: HEADER + v for k, v in FUNCTIONS.items()}
NOT_RMSNORM = {k: HEADER + v for k, v in NOT_RMSNORM.items()}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_forms_are_flagged_with_a_fix(name: str) -> None:
    (finding,) = findings(FUNCTIONS[name], "TRN001")
    assert finding.qualname == "f"
    assert finding.fix is not None and finding.fix.applicability == "safe"
    assert "rms_norm" in finding.fix.edits[-1].content or any(
        "rms_norm" in e.content for e in finding.fix.edits
    )
    assert finding.naive_dispatches is not None and finding.naive_dispatches >= 5
    assert f"{finding.naive_dispatches} separate dispatches" in finding.message


@pytest.mark.parametrize("name", sorted(NOT_RMSNORM))
def test_look_alikes_are_not_flagged(name: str) -> None:
    assert findings(NOT_RMSNORM[name], "TRN001") == []


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_fix_is_numerically_equivalent(name: str, dtype: torch.dtype) -> None:
    source = FUNCTIONS[name]
    x = random(4, 8, D, dtype=dtype)
    w = random(D, dtype=dtype, seed=1)
    original = load(source, "f")
    replacement = load(fixed(source, "TRN001"), "f")
    _assert_rms_close(original, replacement, (x, w))


def _assert_rms_close(original, replacement, inputs) -> None:
    # Default tolerances of the output dtype, in bfloat16 too: torch.rms_norm's CPU kernel and
    # the naive chain agree within them on these inputs (no looser bound was needed).
    with torch.no_grad():
        want, got = original(*inputs), replacement(*inputs)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_model_classes_are_flagged_in_the_right_method(name: str) -> None:
    source, cls = MODULES[name]
    (finding,) = findings(source, "TRN001")
    assert finding.qualname == {"gemma": f"{cls}._norm"}.get(name, f"{cls}.forward")
    assert finding.naive_dispatches == 5
    # T5 multiplies the weight on the norm's line: a run counts that dispatch there too.
    on_lines = {"t5": " (about 6 on its lines as a run counts them)"}.get(name, "")
    assert finding.message == (
        f"naive RMSNorm: 5 separate dispatches and 4 intermediate tensors{on_lines}; "
        "torch.rms_norm is one dispatch (on the CPU, _fused_rms_norm with pow, mean and mul "
        "inside) (static: not measured)"
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(MODULES))
def test_model_class_fix_keeps_outputs_and_dtype(name: str, dtype: torch.dtype) -> None:
    source, cls = MODULES[name]
    original, replacement = module_pair(source, fixed(source, "TRN001"), cls, dtype, D)
    x = random(2, 5, D, dtype=dtype)
    with torch.no_grad():
        want, got = original(x), replacement(x)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


def test_upcast_stays_an_upcast_in_the_fix() -> None:
    out = fixed(LLAMA, "TRN001")
    assert "hidden_states = hidden_states.to(torch.float32)" in out
    assert "return self.weight * hidden_states.to(input_dtype)" in out
    assert "variance = " not in out  # the assignment that only fed the pattern is gone
    assert (
        "torch.rms_norm(hidden_states, hidden_states.shape[-1:], eps=self.variance_epsilon)" in out
    )


def test_t5_fix_normalises_the_upcast_copy() -> None:
    out = fixed(T5, "TRN001")
    assert "torch.rms_norm(hidden_states.to(torch.float32), hidden_states.shape[-1:]" in out


def test_weight_folds_only_when_both_sides_are_float32() -> None:
    (folded,) = findings(FUNCTIONS["gemma_folded"], "TRN001")
    assert "h.shape[-1:], weight=1.0 + w.float(), eps=1e-6)" in folded.fix.edits[0].content  # type: ignore[union-attr]
    assert folded.naive_dispatches == 6
    (kept,) = findings(FUNCTIONS["weight_after"], "TRN001")
    assert "weight=" not in kept.fix.edits[0].content  # type: ignore[union-attr]


def test_a_local_still_read_elsewhere_is_not_deleted() -> None:
    source = HEADER + (
        "def f(x):\n"
        "    v = x.pow(2).mean(-1, keepdim=True)\n"
        "    y = x * torch.rsqrt(v + 1e-6)\n"
        "    return y, v\n"
    )
    out = fixed(source, "TRN001")
    assert "v = x.pow(2).mean(-1, keepdim=True)" in out
    x = random(3, D, dtype=torch.float32)
    want, got = load(source, "f")(x), load(out, "f")(x)
    torch.testing.assert_close(got, want)


def test_variant_source_defines_the_fixed_method_alone() -> None:
    (finding,) = findings(LLAMA, "TRN001")
    variant = finding.variant_source
    assert variant is not None and variant.startswith("def forward(self, hidden_states):\n")
    ns = load(variant, "forward")
    module = load(LLAMA, "LlamaRMSNorm")(D)
    x = random(2, D, dtype=torch.bfloat16)
    torch.testing.assert_close(ns(module, x), module(x))


def test_variant_of_a_plain_function_execs_in_the_module_globals() -> None:
    source = FUNCTIONS["locals_chain"]
    (finding,) = findings(source, "TRN001")
    globals_ = {"torch": torch}
    exec(compile(source, "<m>", "exec"), globals_)
    original = globals_["f"]
    variant_globals = dict(globals_)
    exec(compile(finding.variant_source or "", "<variant>", "exec"), variant_globals)
    x, w = random(2, D, dtype=torch.float32), random(D, dtype=torch.float32, seed=3)
    torch.testing.assert_close(variant_globals["f"](x, w), original(x, w))
    assert finding.lines == (6, 9)  # from `sq = ...` to `out = x * inv`


def test_noqa_suppresses_by_code_prefix_and_bare() -> None:
    line = "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)"
    for comment, hidden in [
        ("  # noqa", True),
        ("  # noqa: TRN001", True),
        ("  # noqa: TRN0", True),
        ("  # NOQA:TRN002,TRN001", True),
        ("  # noqa: TRN101", False),
    ]:
        source = f"{HEADER}def f(x):\n{line}{comment}\n"
        assert (findings(source, "TRN001") == []) is hidden, comment


def test_select_and_ignore() -> None:
    source = FUNCTIONS["pow_rsqrt"]
    assert findings(source, select=["TRN001"])
    assert findings(source, select=["TRN0"])
    assert not findings(source, select=["TRN1"])
    assert not findings(source, ignore=["TRN001"])
    assert not findings(source, ignore=["TRN"])
    assert findings(source, select=["TRN001"], ignore=["TRN"])  # the more specific entry wins


def test_module_alias_is_used_in_the_fix() -> None:
    source = (
        "import torch as th\n\n"
        "def f(x):\n    return x * th.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
    )
    out = fixed(source, "TRN001")
    assert "th.rms_norm(x, x.shape[-1:], eps=1e-6)" in out


def test_columns_count_characters_not_bytes() -> None:
    source = (
        "import torch\ndef f(x):\n"
        '    s = "é"; return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n'
    )
    (finding,) = findings(source, "TRN001")
    assert finding.location.column == source.splitlines()[2].index("x *") + 1
    assert finding.lsp_range()["start"] == {"line": 2, "character": finding.location.column - 1}


def test_fix_adds_import_torch_when_the_module_lacks_it() -> None:
    source = (
        '"""Doc."""\nfrom __future__ import annotations\n\n'
        "def f(x):\n    return x * (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt()\n"
    )
    out = fixed(source, "TRN001")
    assert out.startswith('"""Doc."""\nfrom __future__ import annotations\nimport torch\n')
    (finding,) = findings(source, "TRN001")
    assert finding.variant_source is not None
    assert finding.variant_source.startswith("import torch\ndef f(x):")
