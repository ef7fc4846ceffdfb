"""A run's memory in the editor (lsp/memory.py): growth as a loud diagnostic at its line that
follows edits, and the peak by kind in the function's hover, from placed results written here
(the agent's own figures are tested in tests/agent/test_memorypass.py)."""

from __future__ import annotations

from lsprotocol import types
from trnlens import memoryfigures
from trnlens.lsp import hints, hovers, memory
from trnlens.settings import resolve

from tests.agent.conftest import line_of
from tests.agent.test_memorypass import STEP
from tests.lsp.session import editor, workspace
from tests.lsp.test_features import _doc, _result

MEMORY = {
    "device": "cpu", "steps": 3, "basis": "torch.profiler memory timeline",
    "peak_bytes": 276_832, "peak_phase": "optimizer", "peak_line": {"path": "m.py", "line": 6},
    "at_peak": {"parameters": 49_792, "gradients": 49_792, "optimizer_state": 99_600,
                "temporaries": 65_548, "inputs": 4_096, "kept": 8_000, "activations": 4},
    "growth_per_step_bytes": 4_000,
    "activations_by_module": [{"module": "model.1", "bytes": 8_192},
                              {"module": "model.2", "bytes": 2_048}],
    "growth": [{"path": "m.py", "line": 5, "bytes_per_step": 4_000},
               {"path": "other.py", "line": 9, "bytes_per_step": 4_000}],
    "at_peak_by_line": [{"path": "m.py", "line": 6, "kind": "temporaries", "bytes": 65_548},
                        {"path": "m.py", "line": 5, "kind": "kept", "bytes": 8_000}],
}  # fmt: skip


def _placed(data: dict | None):
    result = _result()
    result.data["memory"] = data
    doc = _doc()
    doc.place(result)
    return doc


def test_growth_is_a_warning_at_its_line_that_follows_edits_and_goes_quiet_when_stale():
    doc = _placed(MEMORY)
    (diagnostic,) = memory.diagnostics(doc, resolve({}))
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    assert diagnostic.code == "memory-growth" and diagnostic.range.start.line == 4
    assert diagnostic.message.startswith("memory grows 4.0 KB a step here")
    assert "`.detach()`" in diagnostic.message
    assert "measured: 3 steps on cpu (f, " in diagnostic.message
    doc.update("import torch\n\n\n" + doc.text[len("import torch\n") :], [None])
    (moved,) = memory.diagnostics(doc, resolve({}))
    assert moved.range.start.line == 6


def test_growth_is_a_hint_at_the_end_of_its_line_within_43_and_says_stale():
    doc = _placed(MEMORY)
    everywhere = types.Range(types.Position(0, 0), types.Position(100, 0))
    (hint,) = hints.fitted(memory.labelled(doc, everywhere))
    assert hint.position == types.Position(4, len("    y = x.pow(2)"))
    assert hint.label == "memory +4.0 KB/step"
    assert "memory grows 4.0 KB a step here" in str(hint.tooltip)
    doc.update(doc.text.replace("y | 1", "y | 2"), [None])  # the function changed
    (stale,) = hints.fitted(memory.labelled(doc, everywhere))
    assert stale.label == "memory +4.0 KB/step · stale"


def test_no_growth_no_memory_and_a_malformed_memory_say_nothing():
    quiet = {**MEMORY, "growth_per_step_bytes": 0, "growth": []}
    for data in (quiet, None, {"peak_bytes": "lots"}):
        doc = _placed(data)
        assert memory.diagnostics(doc, resolve({})) == []
        read = memoryfigures.read(doc.placements["f"].result.data)
        assert (read is None) == (data is not quiet)


def test_the_hover_gives_the_peak_its_phase_and_line_and_what_is_live_by_kind():
    doc = _placed(MEMORY)
    found = hovers.hover(doc, types.Position(3, 4), None)
    assert found is not None
    text = found.contents.value
    assert "**memory** peak 276.8 KB in optimizer (m.py:6)" in text
    assert (
        "live then: parameters 49.8 KB · gradients 49.8 KB · optimizer state 99.6 KB · "
        "activations kept for backward 4 B · temporaries 65.5 KB · inputs 4.1 KB · "
        "kept by earlier steps 8.0 KB"
    ) in text
    assert "**grows 4.0 KB a step**" in text
    assert "activations kept for backward: model.1 8.2 KB · model.2 2.0 KB" in text
    assert "made at: m.py:6 temporaries 65.5 KB · m.py:5 kept by earlier steps 8.0 KB" in text


async def test_a_step_profiled_from_the_editor_warns_of_its_growth_at_the_line(tmp_path):
    """End to end: the real agent's memory pass, its growth a Warning at the appending line, its
    peak in the function's hover."""
    root = workspace(tmp_path)
    (root / "train.py").write_text(STEP.lstrip("\n"), "utf-8")
    growing = line_of(root, "train.py", "history.append") - 1
    async with editor(root) as ed:  # mode auto: the step calls backward, as written
        uri = ed.open("train.py")
        await ed.profile(uri, "leaky")

        def growth():
            return [d for d in ed.diagnostics(uri) if d.code == memory.CODE]

        (found,) = await ed.wait_for(growth, what="the growth warning")
        assert found.range.start.line == growing
        shown_hints = {h.position.line: h.label for h in await ed.hints(uri)}
        assert shown_hints[growing] == "memory +4.0 KB/step"
        assert found.severity == types.DiagnosticSeverity.Warning
        assert found.message.startswith("memory grows 4.0 KB a step here")
        header = line_of(root, "train.py", "def leaky") - 1
        shown = await ed.hover(uri, header, 5)
        assert shown is not None and "**grows 4.0 KB a step**" in shown.contents.value
        assert "**memory** peak " in shown.contents.value


def test_an_out_of_memory_failure_says_what_held_the_memory_in_the_diagnostic_and_hover():
    from trnlens.lsp import diagnostics

    error = {
        "kind": "user_code", "type": "RuntimeError", "path": "m.py", "line": 5,
        "message": "out of memory on cpu in model.0 (Wide): the allocation asked for "
                   "4,503,599,627,370,496 bytes (RuntimeError)",
        "traceback": "Traceback ...",
        "out_of_memory": {"device": "cpu", "requested_bytes": 4_503_599_627_370_496,
                          "module": "model.0 (Wide)",
                          "live": {"other": 2_048, "parameters": 8_320, "gradients": 8_320}},
    }  # fmt: skip
    doc = _doc()
    doc.place(_result(error=error))
    said = "live on cpu when it failed: parameters 8.3 KB · gradients 8.3 KB · other 2.0 KB"
    (found,) = diagnostics.failures(doc, resolve([]))
    assert found.range.start.line == 4
    assert found.message.startswith(error["message"] + "\n" + said + "\nwhile profiling f")
    assert "Traceback" not in found.message
    shown = hovers.hover(doc, types.Position(3, 4), None).contents.value
    assert "failed: out of memory on cpu in model.0 (Wide)" in shown and said in shown
    # a failure of another kind says nothing of memory
    error = {k: v for k, v in error.items() if k != "out_of_memory"}
    doc = _doc()
    doc.place(_result(error=error))
    (found,) = diagnostics.failures(doc, resolve([]))
    assert "live on" not in found.message


def test_the_lens_says_the_peak_and_the_growth_and_a_long_title_drops_the_peak_first():
    from trnlens.lsp import lenses
    from trnlens.settings import LOCAL

    title = lenses._title(_placed(MEMORY), "f", LOCAL)
    assert " · peak 276.8 KB · grows 4.0 KB/step · " in title, title
    assert "peak" not in lenses._title(_placed(None), "f", LOCAL)
    quiet = {**MEMORY, "growth_per_step_bytes": 0, "growth": []}
    assert "grows" not in lenses._title(_placed(quiet), "f", LOCAL)
    # too long for the editor's width: the peak goes (the hover has it), the growth stays
    short = lenses.fit(title, limit=40)
    assert "peak" not in short and "grows 4.0 KB/step" in short


def test_a_multi_rank_lens_names_the_rank_nearest_its_limit_and_the_hover_says_whose():
    from trnlens.lsp import lenses
    from trnlens.settings import LOCAL

    doc = _placed({**MEMORY, "rank": 0, "growth_per_step_bytes": 0, "growth": []})
    (placement,) = doc.placements.values()
    placement.result.data.update({
        "world_size": 2, "slowest_rank": 1,
        "ranks": [{"rank": 0, "memory_growth_per_step_bytes": 0},
                  {"rank": 1, "memory_growth_per_step_bytes": 2_048}],
        "memory_nearest_limit": {
            "rank": 1, "peak_bytes": 300_000, "limit_bytes": 16_000_000_000,
            "share_of_limit": 300_000 / 16_000_000_000, "limit_basis": "the host's memory",
            "others_median_bytes": 276_832, "basis": "peak over the device's memory"},
    })  # fmt: skip
    title = lenses._title(doc, "f", LOCAL)
    # rank 1's peak, named, and the growth of the rank that grows (not rank 0's none)
    assert " · r1 peak 300.0 KB · grows 2.0 KB/step" in title, title
    text = hovers.hover(doc, types.Position(3, 4), None).contents.value
    assert "**memory** (rank 0) peak 276.8 KB" in text
    assert "ranks: rank 1 nearest its memory limit: peak 300.0 KB of 16.0 GB" in text
