"""End to end: open the model, click a lens, see the run in lenses, hints, diagnostics, hovers."""

from __future__ import annotations

import asyncio
import re
import time

from lsprotocol import types

from .session import editor, workspace

NAIVE_DEF = 12  # 0-based lines of fixtures/model.py
NAIVE_POW = 13
NAIVE_RSQRT = 14


def _line_of(uri_text: str, needle: str) -> int:
    return next(i for i, line in enumerate(uri_text.splitlines()) if needle in line)


async def test_lens_click_profiles_and_shows_figures_everywhere(tmp_path):
    root = workspace(tmp_path)
    text = (root / "model.py").read_text("utf-8")
    assert _line_of(text, "def rmsnorm_naive") == NAIVE_DEF
    assert _line_of(text, "x.pow(2)") == NAIVE_POW
    async with editor(root) as ed:
        uri = ed.open()
        lenses = await ed.lenses(uri)
        # Functions using torch or with a directive, the nn.Module class and its forward; not
        # its __init__ (trnlens.lenses.placement "all" brings that back), not the plain class.
        # Not small_inputs either: a `# trnlens: inputs=` directive names it, so it builds
        # test data; profiling it would measure randn.
        assert set(lenses) == {
            "rmsnorm_naive", "rmsnorm_fused", "broken", "sleepy", "Block", "Block.forward",
        }  # fmt: skip
        assert lenses["rmsnorm_naive"].range.start.line == NAIVE_DEF
        assert lenses["rmsnorm_naive"].command.title == "▶ Profile"

        answer, end = await ed.profile(uri, "rmsnorm_naive")
        assert answer["state"] in ("queued", "running") and answer["target"] == "local"
        assert "rmsnorm_naive" in end.message and "dispatches" in end.message
        phases = [r.message for r in ed.progress(answer["token"])]
        assert isinstance(ed.progress(answer["token"])[0], types.WorkDoneProgressBegin)
        assert any(m and m.startswith("measuring") for m in phases), phases

        # The lens: the run's one headline figure (trnlens.headline), the timing pass's median
        # however much the profiler inflated these tiny steps; never "device" on a CPU run. Then
        # the memory pass's peak (no growth: the function keeps nothing).
        title = (await ed.lenses(uri))["rmsnorm_naive"].command.title
        assert re.fullmatch(
            r"▶ Profile · [\d.]+ (µs|ms|s) unprofiled · 6 dispatches( · noisy)? · "
            r"peak [\d.]+ (B|KB|MB|GB) · just now",
            title,
        ), title
        assert "device" not in title
        assert (await ed.lenses(uri))["rmsnorm_fused"].command.title == "▶ Profile"
        assert ed.refreshes["codeLens"] >= 1 and ed.refreshes["inlayHint"] >= 1

        # Inlay hints on the two measured lines, at their ends, shares adding up to 100%.
        hints = await ed.hints(uri)
        by_line = {h.position.line: h for h in hints}
        assert set(by_line) == {NAIVE_POW, NAIVE_RSQRT}
        lines = text.splitlines()
        assert by_line[NAIVE_POW].position.character == len(lines[NAIVE_POW])
        assert by_line[NAIVE_POW].label.endswith("· 2 dispatches")  # pow, mean
        assert by_line[NAIVE_RSQRT].label.endswith("· 4 dispatches")  # add, rsqrt, mul, mul
        shares = [int(h.label.split("%")[0]) for h in hints]
        assert 99 <= sum(shares) <= 101

        # Hotspot diagnostics (default threshold 20%) on the lines above the threshold.
        hot = ed.diagnostics(uri, "hotspot")
        # Hints: a hot line is no problem (kept out of VS Code's Problems), and none where a
        # finding already sits on the line (it carries the measured figures itself)
        assert hot and all(d.severity == types.DiagnosticSeverity.Hint for d in hot)
        found = {d.range.start.line for d in ed.diagnostics(uri) if d.code != "hotspot"}
        assert not found & {d.range.start.line for d in hot}
        assert {d.range.start.line for d in hot} <= {NAIVE_POW, NAIVE_RSQRT}
        for d in hot:
            share = int(d.message.split("%")[0])
            assert share >= 20 and d.source == "trnlens"
        rsqrt = next((d for d in hot if d.range.start.line == NAIVE_RSQRT), None)
        if rsqrt is not None:
            assert "aten::rsqrt" in rsqrt.message and "[64, 256]" in rsqrt.message

        # Hover on a measured line: its ops; on the def line: the run's ops and provenance.
        hover = await ed.hover(uri, NAIVE_POW)
        body = hover.contents.value
        # CPU backend: op time is CPU time, one column (pytest-lsp declares no Markdown parser:
        # no &nbsp; padding)
        assert "| op | calls | CPU | shapes |" in body
        assert "`aten::pow`" in body and "`aten::mean`" in body and "aten::rsqrt" not in body
        assert "backend `cpu`" in body and "target `local`" in body and "mode `inference`" in body
        trace = re.search(r"\[chrome trace\]\((file://[^)]+)\)", body)
        assert trace and trace.group(1).endswith("/trace.json")
        func = (await ed.hover(uri, NAIVE_DEF)).contents.value
        assert "**rmsnorm_naive**" in func and "`aten::rsqrt`" in func and "`aten::mul`" in func
        assert await ed.hover(uri, NAIVE_DEF - 3) is None  # the blank-ish lines above: nothing

        # Re-anchoring: two lines inserted above the function move every figure down by two.
        ed.edit(uri, 2, 0, "# a new comment\n# and another\n")
        hints = await ed.hints(uri)
        assert {h.position.line for h in hints} == {NAIVE_POW + 2, NAIVE_RSQRT + 2}
        lens = (await ed.lenses(uri))["rmsnorm_naive"]
        assert lens.range.start.line == NAIVE_DEF + 2 and "stale" not in lens.command.title
        await ed.wait_for(
            lambda: (
                {d.range.start.line for d in ed.diagnostics(uri, "hotspot")}
                <= {NAIVE_POW + 2, NAIVE_RSQRT + 2}
            ),
            what="hotspots re-anchored",
        )
        # ...and deleting one of them moves them back up by one.
        ed.edit(uri, 2, 0, "", end=(3, 0))
        assert {h.position.line for h in await ed.hints(uri)} == {NAIVE_POW + 1, NAIVE_RSQRT + 1}

        # Editing the function itself: lens and hints say stale instead of disappearing.
        pow_line = NAIVE_POW + 1
        ed.edit(uri, pow_line, 4, "squared = x.pow(2).sum(-1, keepdim=True)", end=(pow_line, 45))
        title = (await ed.lenses(uri))["rmsnorm_naive"].command.title
        assert title.startswith("▶ Profile · stale · ") and "6 dispatches" in title
        hints = await ed.hints(uri)
        assert len(hints) == 2 and all(h.label.endswith("· stale") for h in hints)

        # Settings pulled through workspace/configuration after didChangeConfiguration win
        # over initializationOptions: a higher threshold leaves fewer hotspots, no hints.
        ed.client.set_configuration(
            {"hotspotThreshold": 1.0, "hints": {"enabled": False}}, section="trnlens"
        )
        ed.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings=None)
        )
        # Both follow the pulled settings; the hotspots can also vanish a moment earlier while
        # the stale edit above is re-analysed (a fresh clone under load saw its hints then), so
        # the hints are asked until the new settings answer, within a deadline.
        await ed.wait_for(lambda: not ed.diagnostics(uri, "hotspot"), what="no hotspots at 100%")
        deadline = time.monotonic() + 10
        while (hints := await ed.hints(uri)) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert hints == []
        assert not ed.diagnostics(uri, "hotspot")

        # Clearing results takes every figure away.
        cleared = await ed.command("trnlens.server.clearResults", {"uri": uri})
        assert cleared["cleared"] == 1
        assert (await ed.lenses(uri))["rmsnorm_naive"].command.title == "▶ Profile"
        assert await ed.hints(uri) == []
