"""Module rows that read as the code: a module with no attribute name is named by what it wraps.

Some transformers versions wrap functions such as the rotary embedding in an ``nn.Module``
(a class named ``Func`` holding the function) kept as a global of the modeling file: reachable
from no input, it had no attribute name, and Gemma3's modules table read
``_GEMMA.model.layers.0.self_attn.<Func>`` and ``<Func>.<Func>`` (issue 30). The project below
registers modules the same way (a global wrapper called inside an attention module's forward,
one wrapper calling another, two wrappers of the same function), on a real run.
"""

from __future__ import annotations

import functools

import torch
from trnlens.agent import attribution

from tests.agent.conftest import run

WRAPPED = """
import torch
from torch import nn


class Func(nn.Module):
    # as the library's function wrappers: an nn.Module around a plain function
    def __init__(self, func):
        super().__init__()
        self.func = func

    def forward(self, *args, **kwargs):
        return self.func(*args, **kwargs)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


ROTATE = Func(rotate_half)


def apply_rotary_pos_emb(q, cos, sin):
    return q * cos + ROTATE(q) * sin


APPLY = Func(apply_rotary_pos_emb)
GELU_A = Func(torch.nn.functional.gelu)
GELU_B = Func(torch.nn.functional.gelu)  # the same function wrapped twice: two rows, two names


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x, cos, sin):
        q = APPLY(self.proj(x), cos, sin)
        return GELU_B(GELU_A(q))


def build():
    torch.manual_seed(0)
    return Attention(), torch.randn(2, 4, 16), torch.randn(4, 16), torch.randn(4, 16)


# trnlens: inputs=build
def step(attn, x, cos, sin):
    return attn(x, cos, sin)
"""


def test_an_unnamed_wrapper_is_named_by_the_function_it_wraps_and_no_two_rows_share_a_name(
    make_project,
):
    root = make_project({"rope.py": WRAPPED})
    result = run(root, [{"path": "rope.py", "qualname": "step"}])
    assert result["error"] is None, result["error"]
    names = [m["name"] for m in result["modules"]]
    assert len(names) == len(set(names)), names
    assert not [name for name in names if "<" in name], names
    by_name = {m["name"]: m for m in result["modules"]}
    assert by_name["attn.apply_rotary_pos_emb"]["type"] == "Func"
    assert by_name["attn.apply_rotary_pos_emb.rotate_half"]["type"] == "Func"
    assert {"attn.gelu", "attn.gelu#2"} <= set(by_name)
    assert by_name["attn.proj"]["type"] == "Linear"  # a module with an attribute name keeps it


def test_what_a_module_stands_for():
    class Holder(torch.nn.Module):
        def __init__(self, **kept):
            super().__init__()
            for key, value in kept.items():
                setattr(self, key, value)

    def rotate_half(x):
        return x

    assert attribution.stands_for(Holder(func=rotate_half)) == "rotate_half"
    assert attribution.stands_for(Holder(fn=functools.partial(rotate_half))) == "rotate_half"
    assert attribution.stands_for(Holder(kernel=torch.relu)) == "relu"  # the one function kept
    assert attribution.stands_for(Holder(a=rotate_half, b=torch.relu)) == "Holder"  # which one?
    assert attribution.stands_for(torch.nn.Linear(2, 2)) == "Linear"
    assert attribution.unique("a.gelu", {"a.gelu", "a.gelu#2"}) == "a.gelu#3"
    assert attribution.unique("a.gelu", set()) == "a.gelu"
