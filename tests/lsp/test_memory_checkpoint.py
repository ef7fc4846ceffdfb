"""Activation checkpointing from the editor (memoryfixes.py, issue 41 point 5): a fine-tuning
step profiled in the editor names the module class to checkpoint in its hover, the lightbulb
offers to measure it, and the measured comparison gives each variant's peak, the outputs equal."""

from __future__ import annotations

import re

from trnlens import memoryfixes

from tests.agent.conftest import line_of
from tests.cli.test_compare_checkpoint import STEP
from tests.lsp.session import editor, workspace
from tests.lsp.test_e2e_analysis import actions_at


async def test_the_hover_names_the_block_and_the_lightbulb_measures_checkpointing_it(tmp_path):
    root = workspace(tmp_path)
    (root / "train.py").write_text(STEP.lstrip("\n"), "utf-8")
    header = line_of(root, "train.py", "def step") - 1
    async with editor(root) as ed:
        uri = ed.open("train.py")
        assert [a for a in await actions_at(ed, uri, header) if "checkpointing" in a.title] == []
        await ed.profile(uri, "step")
        shown = await ed.hover(uri, header, 5)
        assert shown is not None
        assert "memory for time: checkpointing Block (4 instances) frees up to" in (
            shown.contents.value
        )
        # the lightbulb on any line of the function
        body = line_of(root, "train.py", "loss.backward()") - 1
        (measure,) = [a for a in await actions_at(ed, uri, body) if "checkpointing" in a.title]
        assert measure.title == (
            "Measure checkpointing Block: step's peak memory against its time (trnlens)"
        )
        (argument,) = measure.command.arguments
        assert argument["code"] == memoryfixes.CHECKPOINT_CODE
        answer = await ed.command(measure.command.command, argument)
        labels = [v["label"] for v in answer["variants"]]
        assert labels == ["step", "step (checkpointed: Block)"], answer
        assert all(v["error"] is None for v in answer["variants"])
        # each variant's peak, the checkpointed one's lower: in the rows, the message and lens
        base, checkpointed = (v["peakMemoryBytes"] for v in answer["variants"])
        assert checkpointed < 0.7 * base, answer["variants"]
        assert answer["maxAbsDiff"][1] == 0
        assert ", peak " in answer["message"] and "checkpointed Block" in answer["message"]
        assert re.search(
            r"checkpointed [\d.]+×, peak −\d+%|checkpointed: .*, peak −", answer["lens"]
        ), answer["lens"]
