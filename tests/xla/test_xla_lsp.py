"""End to end in the editor: a lens click runs the step on the real torch-xla (CPU PJRT) through
a local target whose interpreter is the xla venv; the lens, hints, diagnostics and hover then
say what XLA did (the server itself never imports torch or torch_xla: tests/lsp/guard.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.lsp.session import FAST, editor, workspace

FIXTURE = Path(__file__).parent / "fixtures" / "lsp_step.py"
LENGTH, FALLBACK = 14, 15  # 0-based lines of fixtures/lsp_step.py: the slice, the nonzero


def xla_options(xla_python: Path, tmp_path: Path) -> dict:
    """The editor's settings: a local target whose interpreter is the xla venv, on the CPU
    PJRT device. torch 2.8 leaves a temporary folder when its agent is ended: one of the
    test's own."""
    (tmp_path / "tmp").mkdir()
    env = {"PJRT_DEVICE": "CPU", "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path / "tmp")}
    return {
        **FAST, "warmup": 2, "backend": "xla", "target": "xla",
        "targets": {"xla": {"kind": "local", "python": str(xla_python), "env": env}},
    }  # fmt: skip


async def test_lens_and_hints_after_an_xla_run(xla_python, tmp_path):
    root = workspace(tmp_path)
    shutil.copy(FIXTURE, root / "step.py")
    text = (root / "step.py").read_text("utf-8").splitlines()
    assert "x[:, :length]" in text[LENGTH] and "nonzero" in text[FALLBACK]
    options = xla_options(xla_python, tmp_path)
    async with editor(root, options) as ed:
        uri = ed.open("step.py")
        answer, end = await ed.profile(uri, "step")
        assert answer["target"] == "xla", answer
        title = (await ed.lenses(uri))["step"].command.title
        assert "2 graphs/step" in title, title
        assert "recompiled" in title and f"(shape, :{LENGTH + 1})" in title, title
        assert "1 CPU fallback" in title, title

        # each within VS Code's 43 characters, the problem in the label, the rest in the
        # tooltip (lsp/hints.py fitted)
        found = {h.position.line: h for h in await ed.hints(uri)}
        assert all(len(str(h.label)) <= 43 for h in found.values()), found
        hints = {line: f"{h.label}\n{h.tooltip}" for line, h in found.items()}
        assert "recompiles" in str(found[LENGTH].label), found[LENGTH]
        assert "recompiles every step: shape" in hints[LENGTH], hints
        assert "IR node" in hints[LENGTH] and "graph" in hints[LENGTH]
        assert "CPU fallback" in str(found[FALLBACK].label), found[FALLBACK]
        assert "CPU fallback aten::nonzero" in hints[FALLBACK], hints

        fallbacks = await ed.wait_for(lambda: ed.diagnostics(uri, "xla-fallback"), what="diag")
        assert fallbacks[0].range.start.line == FALLBACK
        recompiles = ed.diagnostics(uri, "xla-recompile")
        assert recompiles and recompiles[0].range.start.line == LENGTH
        assert "every step" in recompiles[0].message

        hover = await ed.hover(uri, 12, 5)  # the def line
        assert hover is not None and "**XLA** (PJRT CPU)" in hover.contents.value


TRAINING = Path(__file__).parent / "fixtures" / "training.py"


async def test_a_fine_tuning_step_in_the_editor_shows_backward_and_agrees_on_forced(
    xla_python, tmp_path
):
    """Issue 40: a step with backward() profiles from the lens; the lens counts the forced
    executions the hints show (one line, one execution), the hover names modules by IR nodes."""
    root = workspace(tmp_path)
    shutil.copy(TRAINING, root / "training.py")
    text = (root / "training.py").read_text("utf-8").splitlines()
    logged = next(n for n, line in enumerate(text) if "loss.item()" in line)
    forward = next(n for n, line in enumerate(text) if "return self.down(h)" in line)
    options = xla_options(xla_python, tmp_path)
    async with editor(root, options) as ed:
        uri = ed.open("training.py")
        answer, _ = await ed.profile(uri, "logging_step")
        assert answer["target"] == "xla", answer
        title = (await ed.lenses(uri))["logging_step"].command.title
        assert "2 graphs/step" in title and "1 forced execution" in title, title
        assert "error" not in title.lower(), title
        hints = {h.position.line: h for h in await ed.hints(uri)}
        forced = [n for n, h in hints.items() if "forced execution" in str(h.label)]
        assert forced == [logged], hints
        assert "bwd)" in str(hints[forward].label), hints[forward].label
        assert "backward" in str(hints[forward].tooltip)
        definition = next(n for n, line in enumerate(text) if "def logging_step" in line)
        hover = await ed.hover(uri, definition, 5)
        assert hover is not None and "IR nodes by module" in hover.contents.value
        assert "`model.down`" in hover.contents.value
        # what the step holds on the device (issue 41), the hover's memory line
        assert "memory: held on the device between steps: parameters 10.5 KB" in (
            hover.contents.value
        )
