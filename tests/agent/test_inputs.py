"""Inputs: defaults, the `# trnlens: inputs=NAME` directive, modules and methods, and the errors."""

from __future__ import annotations

import pytest
from trnlens.agent.errors import AgentError

from tests.agent.conftest import line_of, run

CODE = """
import torch
from torch import nn


def with_defaults(x=torch.ones(4, 8), k: int = 2):
    return x * k


def args_only():
    return (torch.randn(4, 8), torch.randn(8))


def args_and_kwargs():
    return (torch.randn(4, 8),), {"scale": 3.0}


# trnlens: inputs=args_only
def add(x, w):
    return x + w


# trnlens: inputs=args_and_kwargs
def scaled(x, *, scale):
    return x * scale


def norm_inputs():
    return Norm(8), (torch.randn(2, 8),)


# some other comment
# trnlens: inputs=norm_inputs
class Norm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self._norm(x) * self.weight

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def needs_args(x, w, eps=1e-6):
    return x * w


# trnlens: inputs=not_there
def names_missing_factory(x):
    return x


def broken_factory():
    raise RuntimeError("factory exploded")


# trnlens: inputs=broken_factory
def uses_broken_factory(x):
    return x
"""


@pytest.fixture
def root(make_project):
    return make_project({"code.py": CODE})


def profile(root, qualname, **kw):
    return run(root, [{"path": "code.py", "qualname": qualname}], **kw)


def test_defaults_need_nothing(root):
    result = profile(root, "with_defaults")
    assert result["error"] is None
    assert result["inputs"]["source"] == "defaults"
    assert result["dispatches_per_step"] == 1


def test_directive_tuple(root):
    result = profile(root, "add")
    assert result["inputs"]["source"] == "directive:args_only"
    assert [a["shape"] for a in result["inputs"]["args"]] == [[4, 8], [8]]


def test_directive_args_and_kwargs(root):
    result = profile(root, "scaled")
    assert result["error"] is None
    assert result["inputs"]["kwargs"]["scale"] == {"type": "float", "repr": "3.0"}


def test_module_class_calls_the_instance(root):
    result = profile(root, "Norm")
    assert result["error"] is None
    assert result["inputs"]["instance"] == {"type": "Norm", "parameters": 8}
    assert result["dispatches_per_step"] == 6  # _norm's 5 + the weight multiply


def test_method_uses_its_class_directive(root):
    result = profile(root, "Norm._norm")
    assert result["error"] is None
    assert result["dispatches_per_step"] == 5
    assert result["function"]["line"] == line_of(root, "code.py", "def _norm(self, x):")


def test_missing_inputs_say_exactly_what_to_write(root):
    with pytest.raises(AgentError) as caught:
        profile(root, "needs_args")
    error = caught.value
    assert error.kind == "usage" and error.type == "InputsMissing"
    assert error.line == line_of(root, "code.py", "def needs_args(")
    assert "needs_args(x, w, eps) needs arguments" in error.message
    assert "# trnlens: inputs=needs_args_inputs" in error.message
    assert "def needs_args_inputs():" in error.message


def test_directive_naming_nothing(root):
    with pytest.raises(AgentError) as caught:
        profile(root, "names_missing_factory")
    assert "inputs=not_there" in caught.value.message
    assert "def not_there():" in caught.value.message


def test_failing_factory_is_user_code_at_its_line(root):
    result = profile(root, "uses_broken_factory")
    error = result["error"]
    assert error["kind"] == "user_code"
    assert error["message"] == "RuntimeError: factory exploded"
    assert (error["path"], error["line"]) == (
        "code.py",
        line_of(root, "code.py", 'raise RuntimeError("factory exploded")'),
    )


def test_unknown_qualname_lists_what_exists(root):
    with pytest.raises(AgentError) as caught:
        profile(root, "nope")
    assert "no function or class named 'nope'" in caught.value.message
    assert "with_defaults" in caught.value.message
