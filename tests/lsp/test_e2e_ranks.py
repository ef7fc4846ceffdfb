"""End to end: a target with nproc_per_node 2; its lens offers the ranks, a click runs them, and
the lens and each collective's line then show the ranks."""

from __future__ import annotations

import re

from tests.ranks.conftest import IMBALANCED

from .session import FAST, editor, workspace


async def test_a_two_rank_target_shows_the_slowest_rank_on_the_lens_and_waits_on_the_line(
    tmp_path,
):
    root = workspace(tmp_path)
    (root / "ranks_step.py").write_text(IMBALANCED.lstrip("\n"), "utf-8")
    text = (root / "ranks_step.py").read_text("utf-8")
    reduce_line = next(i for i, line in enumerate(text.splitlines()) if "all_reduce(y)" in line)
    options = {
        **FAST,
        "backend": "cpu",
        "targets": {"two": {"kind": "local", "nproc_per_node": 2}},
        "target": "two",
    }
    async with editor(root, options) as ed:
        uri = ed.open("ranks_step.py")
        lens = (await ed.lenses(uri))["step"]
        assert lens.command.title == "▶ Profile on two (2 ranks)"
        # The target picker says which target runs ranks, and the pick maps back to its name.
        ed.pick = "two (2 ranks)"
        picked = await ed.command("trnlens.server.selectTarget")
        assert [a.title for a in ed.questions[-1].actions] == ["local", "two (2 ranks)"]
        assert picked["target"] == "two"

        _, end = await ed.profile(uri, "step")
        assert "step" in end.message, end.message
        title = (await ed.lenses(uri))["step"].command.title
        # the ranks said once, then the slowest rank's own figures, labelled with it (issue 33)
        assert re.search(
            r"^▶ Profile on two · rank [01] of 2 \(slowest: busy \+\d+%, wall [+−±]\d+%\) · "
            r"\d+% in all_reduce · "
            r"[\d.]+ (ns|µs|ms|s) (unprofiled|CPU \(ops\), profiled)",
            title,
        ), title
        assert title.count("2 ranks") == 0 and title.count("rank") == 1, title

        def_line = next(i for i, line in enumerate(text.splitlines()) if "def step" in line)
        hover = (await ed.hover(uri, def_line, 5)).contents.value
        assert "| rank | wall | busy | in collectives | waiting |" in hover
        assert "| 1 ◀ slowest |" in hover and "| 0 |" in hover

        hints = [h for h in await ed.hints(uri) if h.position.line == reduce_line]
        assert len(hints) == 1, hints
        label = hints[0].label
        # within VS Code's default hint length (43); every rank's figures in the tooltip
        assert re.fullmatch(
            r"all_reduce: r[01] waits [\d.]+ (ns|µs|ms|s)( of [\d.]+ (ns|µs|ms|s))?", label
        ), label
        assert len(label) <= 43, label
        assert re.search(
            r"all_reduce: wait r0 [\d.]+ (ns|µs|ms|s) · r1 [\d.]+ (ns|µs|ms|s) "
            r"\(in it: [\d.]+ (ns|µs|ms|s), [\d.]+ (ns|µs|ms|s) per step\)",
            str(hints[0].tooltip),
        ), hints[0].tooltip


async def test_a_rank_that_raises_shows_its_error_at_the_line_naming_the_rank(tmp_path):
    from tests.ranks.test_faults import RAISES

    root = workspace(tmp_path)
    (root / "ranks_step.py").write_text(RAISES.lstrip("\n"), "utf-8")
    text = (root / "ranks_step.py").read_text("utf-8")
    raise_line = next(i for i, line in enumerate(text.splitlines()) if "raise ValueError" in line)
    options = {
        **FAST,
        "backend": "cpu",
        "targets": {"two": {"kind": "local", "nproc_per_node": 2}},
        "target": "two",
    }
    async with editor(root, options) as ed:
        uri = ed.open("ranks_step.py")
        _, end = await ed.profile(uri, "step")
        assert "raised" in end.message and "rank 1" in end.message, end.message
        # the run's diagnostics are published once it is stored (off the loop): wait for them
        (diagnostic,) = await ed.wait_for(
            lambda: ed.diagnostics(uri, "run-user_code"), what="the rank's error on its line"
        )
        assert diagnostic.range.start.line == raise_line
        assert "rank 1: ValueError: rank one gives up" in diagnostic.message
