"""Module swaps: a library class's forward replaced on the run's instances, source untouched.

On a tiny random-weight LlamaForCausalLM (transformers 4.57.6, built from a config), the swap of
LlamaRMSNorm.forward for the analysis' fix (torch.rms_norm) is measured beside the original:
fewer dispatches, the same outputs in float32 and bfloat16."""

from __future__ import annotations

import shutil
import sys

import pytest
import torch
from trnlens.agent import comparison, swaps
from trnlens.agent.comparison import Timed
from trnlens.agent.errors import AgentError
from trnlens.libraries.rules import analysed_file

from tests.agent.conftest import run
from tests.cli.conftest import REPO
from tests.libraries.fixtures import TYPE_PATH, modeling_llama

SAMPLE = "samples/tiny_llama.py"


def fixed_forward() -> str:
    found = [f for f in analysed_file(modeling_llama()).findings if f.code == "TRN001"]
    assert len(found) == 1 and found[0].variant_source
    return found[0].variant_source


@pytest.fixture
def project(tmp_path):
    shutil.copytree(REPO / "samples", tmp_path / "samples")
    return tmp_path


@pytest.mark.parametrize("inputs", ["llama_inputs", "llama_inputs_bf16"])
def test_swapped_rmsnorm_keeps_the_outputs_with_fewer_dispatches(project, inputs) -> None:
    swap = {"type_path": TYPE_PATH, "method": "forward", "source": fixed_forward()}
    variants = [
        {"path": SAMPLE, "qualname": "logits"},
        {"path": SAMPLE, "qualname": "logits", "module_swaps": [swap], "label": "swapped"},
    ]
    outcome = run(project, variants, inputs=inputs)
    original, swapped = outcome["variants"]
    assert original["error"] is None and swapped["error"] is None
    assert swapped["variant"]["kind"] == "swap"
    assert swapped["variant"]["swaps"] == [{"type_path": TYPE_PATH, "method": "forward"}]
    assert swapped["variant"]["swapped_instances"] == 5  # 2 layers x 2 norms + the final norm
    # Each norm call goes from 8 dispatches (to, pow, mean, add, rsqrt, mul, to, mul) to 4.
    assert original["dispatches_per_step"] - swapped["dispatches_per_step"] == 5 * 4
    assert outcome["max_abs_diff"] == [0.0, 0.0]
    assert "/site-packages/" not in str(swapped["variant"])  # nothing written anywhere


def test_swaps_apply_to_the_exact_class_and_are_undone() -> None:
    class Norm(torch.nn.Module):
        def forward(self, x):
            return x + 1

    class Sub(Norm):
        pass

    module = sys.modules[__name__]
    Norm.__module__ = Sub.__module__ = __name__
    module.Norm = Norm
    try:
        tree = torch.nn.Sequential(Norm(), Sub(), torch.nn.Sequential(Norm()))
        source = "def forward(self, x):\n    return x + 2\n"
        swap = {"type_path": f"{__name__}.Norm", "method": "forward", "source": source}
        done = swaps.apply([swap], [{"model": tree}], torch, "test")
        assert swaps.count(done) == 2
        assert tree(torch.zeros(1)).item() == 5  # 2 (swapped) + 1 (subclass) + 2 (swapped)
        swaps.undo(done)
        assert tree(torch.zeros(1)).item() == 3
        assert all("forward" not in m.__dict__ for m in tree.modules())
        # A comparison's rounds run after the variant's passes (and its undo): each round call
        # of the swapped variant puts the swap back for that call only (seen: the "fixed"
        # variant's rounds timed the library's own code).
        outputs: list[float] = []
        entry = Timed(1, RoundCalls(), None, lambda: outputs.append(tree(torch.zeros(1)).item()),
                      done)  # fmt: skip
        comparison.round_call(entry)
        assert outputs == [5]
        assert tree(torch.zeros(1)).item() == 3
    finally:
        delattr(module, "Norm")


class RoundCalls:
    """Stands in for the Measurer's round call (its timing is not what is tested here)."""

    def round_call(self, step) -> float:
        step()
        return 1.0


def test_a_swap_that_reaches_no_instance_is_a_usage_error() -> None:
    swap = {"type_path": "torch.nn.LayerNorm", "method": "forward",
            "source": "def forward(self, x):\n    return x\n"}  # fmt: skip
    with pytest.raises(AgentError, match="no torch.nn.LayerNorm instance is reachable"):
        swaps.apply([swap], [torch.nn.Linear(2, 2)], torch, "test")
    with pytest.raises(AgentError, match="cannot find the class"):
        swaps.apply([{**swap, "type_path": "nowhere.Nothing"}], [], torch, "test")
