"""Requests end to end in process: errors, modes, variants and comparisons, buffers, packages."""

from __future__ import annotations

import pytest
from trnlens.agent.errors import AgentError

from tests.agent.conftest import line_of, run

RAISES = """
import torch


def helper(x):
    return x.view(3, 7)  # cannot view 4x8 as 3x7


def fails(x=torch.ones(4, 8)):
    y = x * 2
    return helper(y)
"""

MODES = """
import torch
from torch import nn

SEEN = {}


def factory():
    return Block(), (torch.randn(2, 16),)


# trnlens: inputs=factory
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x):
        SEEN["inference"] = torch.is_inference_mode_enabled()
        SEEN["training"] = self.training
        return torch.relu(self.linear(x))


def observed():
    return dict(SEEN)
"""

RMS = """
import torch


def inputs():
    return (torch.randn(4, 32, 128), torch.randn(128))


# trnlens: inputs=inputs
def naive(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
"""

FIX = """
def naive(x, w, eps=1e-6):
    return torch.rms_norm(x, (x.shape[-1],), w, eps)
"""


def test_raising_function_reports_the_innermost_project_line(make_project):
    root = make_project({"bad.py": RAISES})
    result = run(root, [{"path": "bad.py", "qualname": "fails"}])
    error = result["error"]
    assert error["kind"] == "user_code"
    assert error["type"] == "RuntimeError"
    assert error["line"] == line_of(root, "bad.py", "return x.view(3, 7)")
    assert error["path"] == "bad.py"
    assert "view" in error["traceback"]
    assert result["dispatches_per_step"] is None


def test_syntax_error_points_at_its_line(make_project):
    root = make_project({"broken.py": "import torch\n\ndef f(x=1):\n    return x +\n"})
    error = run(root, [{"path": "broken.py", "qualname": "f"}])["error"]
    assert (error["kind"], error["type"]) == ("user_code", "SyntaxError")
    assert (error["path"], error["line"]) == ("broken.py", 4)


def test_inference_mode_is_the_default(make_project):
    root = make_project({"block.py": MODES})
    result = run(root, [{"path": "block.py", "qualname": "Block"}])
    import sys

    module = next(
        m for m in sys.modules.values() if getattr(m, "__file__", "") == str(root / "block.py")
    )
    assert module.observed() == {"inference": True, "training": False}
    assert result["mode"] == "inference"


def test_training_mode_runs_backward(make_project):
    root = make_project({"block.py": MODES})
    inference = run(root, [{"path": "block.py", "qualname": "Block"}])
    training = run(root, [{"path": "block.py", "qualname": "Block"}], mode="training")
    import sys

    module = next(
        m for m in sys.modules.values() if getattr(m, "__file__", "") == str(root / "block.py")
    )
    assert module.observed() == {"inference": False, "training": True}
    assert training["mode"] == "training"
    # Backward adds its own dispatches (the grads of linear and relu, the loss).
    assert training["dispatches_per_step"] > inference["dispatches_per_step"]
    assert any("Backward" in op["name"] or "backward" in op["name"] for op in training["ops"])


def test_bad_mode_is_a_usage_error(make_project):
    root = make_project({"block.py": MODES})
    with pytest.raises(AgentError) as caught:
        run(root, [{"path": "block.py", "qualname": "Block"}], mode="fast")
    assert caught.value.kind == "usage"


def test_compare_original_fix_and_compiled(make_project):
    root = make_project({"rms.py": RMS})
    outcome = run(
        root,
        [
            {"path": "rms.py", "qualname": "naive"},
            {"path": "rms.py", "qualname": "naive", "source": FIX, "label": "fused fix"},
            {"path": "rms.py", "qualname": "naive", "compile": True},
        ],
    )
    naive, fixed, compiled = outcome["variants"]
    assert [v["dispatches_per_step"] for v in outcome["variants"]] == [6, 1, 1]
    assert fixed["variant"] == {
        "label": "fused fix",
        "kind": "source",
        "source_hash": fixed["variant"]["source_hash"],
    }
    assert fixed["variant"]["source_hash"].startswith("sha256:")
    assert compiled["variant"]["kind"] == "compiled"
    # All three are the same function on the same inputs.
    assert naive["function"]["source_hash"] == fixed["function"]["source_hash"]
    assert naive["inputs"] == fixed["inputs"] == compiled["inputs"]
    assert outcome["baseline"] == 0 and outcome["speedups"][0] == 1.0
    assert all(s > 0 for s in outcome["speedups"])
    low, high = outcome["speedup_ranges"][1]
    assert low <= outcome["speedups"][1] <= high
    assert outcome["max_abs_diff"][0] == 0.0
    assert outcome["max_abs_diff"][1] < 1e-4 and outcome["max_abs_diff"][2] < 1e-4
    # The fix ran as source text: its frames are the user's code, not a library's (issue 21)
    frames = [f for f in fixed["frames"] if f["path"].startswith("<trnlens variant ")]
    assert frames and all(f["project"] and f["library"] is None for f in frames)
    assert len({v["run_id"] for v in outcome["variants"]}) == 3


def test_variant_source_must_define_the_name(make_project):
    root = make_project({"rms.py": RMS})
    with pytest.raises(AgentError) as caught:
        run(root, [{"path": "rms.py", "qualname": "naive", "source": "def other(x): return x"}])
    assert "defines no 'naive'" in caught.value.message


def test_unsaved_buffer_is_what_runs(make_project):
    root = make_project({"rms.py": RMS})
    buffer = RMS.replace(
        "return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w",
        "return torch.rms_norm(x, (x.shape[-1],), w, eps)",
    )
    result = run(root, [{"path": "rms.py", "qualname": "naive"}], files={"rms.py": buffer})
    assert result["function"]["unsaved"] is True
    assert result["dispatches_per_step"] == 1
    on_disk = run(root, [{"path": "rms.py", "qualname": "naive"}])
    assert on_disk["function"]["unsaved"] is False
    assert on_disk["dispatches_per_step"] == 6
    assert on_disk["function"]["source_hash"] != result["function"]["source_hash"]


def test_package_relative_imports_work(make_project):
    root = make_project(
        {
            "pkg/__init__.py": "",
            "pkg/layers/__init__.py": "",
            "pkg/layers/ops.py": "def double(t):\n    return t * 2\n",
            "pkg/layers/block.py": """
                import torch
                from .ops import double
                from ..config import SIZE


                def run(x=torch.ones(SIZE)):
                    return double(x) + 1
            """,
            "pkg/config.py": "SIZE = 16\n",
        }
    )
    result = run(root, [{"path": "pkg/layers/block.py", "qualname": "run"}])
    assert result["error"] is None, result["error"]
    assert result["dispatches_per_step"] == 2
    assert {e["path"] for e in result["lines"]} == {"pkg/layers/block.py", "pkg/layers/ops.py"}


def test_a_file_named_like_a_stdlib_module(make_project):
    root = make_project(
        {"profile.py": "import torch\n\ndef f(x=torch.ones(3)):\n    return x + 1\n"}
    )
    result = run(root, [{"path": "profile.py", "qualname": "f"}])
    assert result["error"] is None
    assert result["dispatches_per_step"] == 1


def test_edited_file_is_reimported(make_project):
    root = make_project({"edit.py": "import torch\n\ndef f(x=torch.ones(3)):\n    return x + 1\n"})
    first = run(root, [{"path": "edit.py", "qualname": "f"}])
    (root / "edit.py").write_text(
        "import torch\n\ndef f(x=torch.ones(3)):\n    return (x + 1) * 2\n"
    )
    second = run(root, [{"path": "edit.py", "qualname": "f"}])
    assert (first["dispatches_per_step"], second["dispatches_per_step"]) == (1, 2)


def test_phases_are_reported_in_order(make_project):
    root = make_project({"rms.py": RMS})
    phases = []
    run(root, [{"path": "rms.py", "qualname": "naive"}], phases=phases)
    names = [p.phase for p in phases]
    assert all(p.variant == 0 and p.variants == 1 for p in phases)
    # the state says how many steps the pass runs: no reader parses the message for it
    measuring = next(p for p in phases if p.phase == "measuring")
    assert (measuring.step, measuring.steps) == (0, 2)
    timing = next(p for p in phases if p.phase == "timing")
    assert timing.steps == 3
    for earlier, later in [
        ("importing", "building-inputs"),
        ("building-inputs", "warm-up"),
        ("warm-up", "measuring"),
        ("measuring", "timing"),
    ]:
        assert names.index(earlier) < names.index(later)
    assert "exporting" in names
    assert (root / ".stage").is_dir()
