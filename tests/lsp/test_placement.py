"""Where Profile lenses go by default: nn.Module classes, forward, torch users, directives."""

from __future__ import annotations

import ast

from trnlens.lsp.documents import analyse
from trnlens.lsp.placement import has_directive, torch_names, uses_torch, wants_lens

TEXT = """import math

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x) * 2

    def gate(self, x):
        return F.silu(x)

    def extra_repr(self):
        return "block"


class Plain:
    def step(self, x):
        return torch.relu(x)

    def size(self):
        return 3


def helper(x, scale=2.0):
    return (x * scale).sum(-1)


def uses_math(x):
    return math.sqrt(x)


def norm(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True))


# trnlens: inputs=small
def marked(x):
    return x + 1
"""


def lensed(placement: str) -> list[str]:
    analysis = analyse(TEXT)
    return [
        s.qualname
        for s in analysis.symbols.values()
        if wants_lens(s.qualname, s.kind, s.suggested, analysis.modules, placement)
    ]


def test_default_placement_is_where_torch_runs():
    assert lensed("torch") == [
        "Block",
        "Block.forward",
        "Block.gate",
        "Plain.step",
        "norm",
        "marked",
    ]


def test_all_brings_back_every_function():
    assert lensed("all") == [
        "Block", "Block.__init__", "Block.forward", "Block.gate", "Block.extra_repr",
        "Plain.step", "Plain.size", "helper", "uses_math", "norm", "marked",
    ]  # fmt: skip


def test_torch_names_follow_every_import_form():
    tree = ast.parse(
        "import torch.nn\nimport torch as t\nfrom torch.nn import functional as G\n"
        "from torch import nn, Tensor\nfrom .torch import x\nimport torchvision\n"
    )
    assert torch_names(tree) == {"torch", "t", "G", "nn", "Tensor"}


def test_a_shadowing_local_is_still_a_use_but_strings_and_attributes_are_not():
    tree = ast.parse("def f(x):\n    return x.torch + len('torch')\n")
    assert not uses_torch(tree.body[0], frozenset({"torch"}))
    assert not uses_torch(tree.body[0], frozenset())


def test_tensor_parameters_are_a_use_decorators_are_not():
    names = frozenset({"torch", "Tensor"})
    tree = ast.parse(
        "def by_default(x=torch.ones(4)):\n    return x * 2\n"
        "def annotated(x: Tensor, *, y: 'torch.Tensor' = None):\n    return x * 2\n"
        "def returns(x) -> torch.Tensor:\n    return x\n"
        "@torch.no_grad()\ndef decorated(x):\n    return x * 2\n"
    )
    assert [uses_torch(f, names) for f in tree.body] == [True, True, True, False]


def test_directive_only_in_the_comment_run_right_above():
    lines = [
        "# trnlens: inputs=a",
        "",
        "def f(): pass",
        "# note",
        "# trnlens: x=1",
        "def g(): pass",
    ]
    assert not has_directive(lines, 2)
    assert has_directive(lines, 5)
