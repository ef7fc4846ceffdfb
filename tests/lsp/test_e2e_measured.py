"""End to end: a training step profiled from its lens; what the run's pattern checks saw becomes
diagnostics at the lines that dispatched it (source ``trnlens (measured)``), with the measured
cost and the proven quick fixes."""

from __future__ import annotations

import re

from lsprotocol import types

from .session import editor, workspace

TRAIN = """import torch
from torch import nn


def step_inputs():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Flatten(), nn.Linear(1568, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    return (model, opt, torch.randn(8, 3, 16, 16), torch.randn(8, 4))


# trnlens: inputs=step_inputs
def train_step(model, opt, x, y):
    opt.zero_grad(set_to_none=False)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss
"""
ZERO, FORWARD, STEP = 12, 13, 15  # 0-based lines of TRAIN


def _apply(text: str, edit: types.TextEdit) -> str:
    lines = text.splitlines(keepends=True)
    start, end = edit.range.start, edit.range.end
    assert start.line == end.line
    line = lines[start.line]
    lines[start.line] = line[: start.character] + edit.new_text + line[end.character :]
    return "".join(lines)


async def test_measured_findings_are_diagnostics_with_quick_fixes(tmp_path):
    root = workspace(tmp_path)
    (root / "train.py").write_text(TRAIN, "utf-8")
    async with editor(root) as ed:
        uri = ed.open("train.py")
        _, end = await ed.profile(uri, "train_step")
        assert "train_step" in end.message

        def measured():
            found = [d for d in ed.diagnostics(uri) if d.source == "trnlens (measured)"]
            return len(found) >= 3 and found

        found = {d.code: d for d in await ed.wait_for(measured, what="measured diagnostics")}
        assert found["optimizer-single-tensor"].range.start.line == STEP
        assert found["grad-not-set-to-none"].range.start.line == ZERO
        assert found["conv-bias-before-batchnorm"].range.start.line == FORWARD
        for d in found.values():
            # a Warning from 1% of the step (lsp/run_findings.py severity), else Information
            share = re.search(r"(under )?([\d.]+)% of the step", d.message)
            warns = share is not None and share[1] is None and float(share[2]) >= 1
            assert d.severity == (
                types.DiagnosticSeverity.Warning if warns else types.DiagnosticSeverity.Information
            ), d.message
            # a finding's time is its share of the headline the lens shows (agent/basis.py)
            basis = ("CPU (ops) per step", "unprofiled share per step")
            assert "measured: " in d.message and any(b in d.message for b in basis)
            assert "% of the step (train_step, just now)" in d.message

        actions = await ed.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri),
                range=types.Range(types.Position(0, 0), types.Position(17, 0)),
                context=types.CodeActionContext(diagnostics=list(found.values())),
            )
        )
        fixes = {a.diagnostics[0].code: a for a in actions if a.edit}
        text = TRAIN
        for code, expected in [
            ("grad-not-set-to-none", "opt.zero_grad(set_to_none=True)"),
            ("optimizer-single-tensor", "lr=0.1, foreach=True)"),
            ("conv-bias-before-batchnorm", "nn.Conv2d(3, 8, 3, bias=False)"),
        ]:
            (edit,) = fixes[code].edit.changes[uri]
            fixed = _apply(text, edit)
            assert expected in fixed and expected not in text, (code, fixed)
        assert all(a.title.endswith(", measured)") and a.is_preferred for a in fixes.values())
