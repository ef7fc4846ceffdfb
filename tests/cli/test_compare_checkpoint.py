"""``trnlens compare --checkpoint PATH::QUALNAME`` (issue 41, point 5): a fix that trades time
for memory, measured. A step of 4 residual blocks whose sizes are known in advance: its profile
names ``Block`` to checkpoint, and the comparison measures the peak falling, the kept
activations falling to the blocks' inputs, and the outputs equal."""

from __future__ import annotations

import json

from .conftest import trnlens

WIDTH, BATCH, BLOCKS = 128, 2048, 4
FLOAT = 4
ACTIVATION = BATCH * WIDTH * FLOAT  # one (BATCH, WIDTH) float32 tensor: 1 MiB

STEP = f"""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear({WIDTH}, {4 * WIDTH})
        self.act = nn.GELU()
        self.down = nn.Linear({4 * WIDTH}, {WIDTH})

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


def build():
    torch.manual_seed(0)
    model = nn.Sequential(*[Block() for _ in range({BLOCKS})])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, opt, torch.randn({BATCH}, {WIDTH})


# trnlens: inputs=build
def step(model, opt, x):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.detach()
"""

FAST = ["--backend", "cpu", "--warmup", "1", "--steps", "3", "--repeats", "5"]


def _kept(variant: dict) -> int:
    return sum(k["bytes"] for k in variant["memory"]["activations_by_module"])


def test_the_profile_names_the_block_and_the_comparison_measures_memory_against_time(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(STEP.lstrip("\n"))
    refused = trnlens("compare", "--checkpoint", "train.py::step", *FAST, cwd=tmp_path)
    assert refused.returncode == 2 and "profile train.py::step first" in refused.stderr

    profiled = trnlens("profile", *FAST, "--quiet", "train.py::step", cwd=tmp_path)
    assert profiled.returncode == 0, profiled.stderr
    assert "memory for time: checkpointing Block (4 instances) frees up to " in profiled.stdout
    assert "measure it: trnlens compare --checkpoint train.py::step" in profiled.stdout

    done = trnlens("compare", "--checkpoint", "train.py::step", *FAST, "--format", "json",
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    base, checkpointed = outcome["variants"]
    assert checkpointed["variant"]["label"] == "step (checkpointed: Block)"
    assert outcome["max_abs_diff"][1] == 0  # the recomputed forward is the same arithmetic
    # kept for backward: each block's up, GELU outputs (4x wide) and the rest, against only
    # what the checkpoints keep: the inputs of blocks 1-3 and the last block's output (kept by
    # pow), and in both the loss's two float32 scalars (the step's own code)
    assert _kept(base) > 8 * BLOCKS * ACTIVATION
    assert _kept(checkpointed) == BLOCKS * ACTIVATION + 2 * FLOAT, checkpointed["memory"]
    assert checkpointed["memory"]["peak_bytes"] < base["memory"]["peak_bytes"] * 0.7
