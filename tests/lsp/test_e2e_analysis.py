"""End to end: static-analysis diagnostics, quick fixes, the Compare lens and Measure the fix."""

from __future__ import annotations

import re

from lsprotocol import types
from trnlens.analysis import analyse_source, apply_fixes

from .session import editor, workspace

NAIVE_DEF = 12  # 0-based lines of fixtures/model.py
NAIVE_POW = 13
NAIVE_RSQRT = 14
NOQA = "  # " + "noqa: TRN001"  # (split: ruff reads a noqa anywhere on a line)

# A line holding an astral character (two UTF-16 units) and a two-byte one before the pattern.
UNICODE = """import torch


def tag(label, value):
    return value


def rms_é(x, weight, eps=1e-6):
    squared = x.pow(2).mean(-1, keepdim=True)
    return tag("é🙂", x * torch.rsqrt(squared + eps)) * weight
"""


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """What an editor does with a WorkspaceEdit: UTF-16 positions, applied back to front."""
    lines = text.split("\n")

    def offset(position: types.Position) -> int:
        before = sum(len(line) + 1 for line in lines[: position.line])
        units = lines[position.line].encode("utf-16-le")[: 2 * position.character]
        return before + len(units.decode("utf-16-le"))

    ordered = sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character))
    for edit in reversed(ordered):
        start, end = offset(edit.range.start), offset(edit.range.end)
        text = text[:start] + edit.new_text + text[end:]
    return text


def full_change(ed, uri: str, text: str) -> None:
    ed.versions[uri] += 1
    ed.client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=ed.versions[uri], uri=uri),
            [types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def _command_or_action(converter):
    """lsprotocol's client converter turns a CodeAction carrying a command into a Command (the
    union is tried in order); an editor tells them apart by ``command`` being a string."""

    def structure(obj, _type):
        kind = types.Command if isinstance(obj.get("command"), str) else types.CodeAction
        return converter.structure(obj, kind)

    return structure


async def actions_at(ed, uri: str, line: int, character: int = 20) -> list[types.CodeAction]:
    converter = ed.client.protocol._converter
    converter.register_structure_hook(
        types.Command | types.CodeAction, _command_or_action(converter)
    )
    here = types.Position(line, character)
    found = await ed.client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(uri),
            types.Range(here, here),
            types.CodeActionContext(diagnostics=ed.diagnostics(uri)),
        )
    )
    return list(found or [])


async def compare_lenses(ed, uri: str) -> dict[str, types.CodeLens]:
    found = await ed.client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri))
    )
    return {
        lens.command.arguments[0]["qualname"]: lens
        for lens in found or []
        if lens.command is not None and lens.command.command == "trnlens.server.compare"
    }  # (a Profile lens with figures has no command until resolved: not a compare lens)


async def test_diagnostics_quick_fix_noqa_and_ignore_without_any_run(tmp_path):
    root = workspace(tmp_path)
    (root / "uni.py").write_text(UNICODE, "utf-8")
    async with editor(root) as ed:
        uri = ed.open()
        found = await ed.wait_for(lambda: ed.diagnostics(uri, "TRN001"), what="TRN001")
        assert len(found) == 1
        diagnostic = found[0]
        assert diagnostic.source == "trnlens"
        assert diagnostic.severity == types.DiagnosticSeverity.Warning
        assert diagnostic.range.start == types.Position(NAIVE_RSQRT, 11)
        assert diagnostic.range.end == types.Position(NAIVE_RSQRT, 41)
        assert "naive RMSNorm" in diagnostic.message and "measured:" not in diagnostic.message
        assert not (root / ".trnlens").exists()  # nothing ran, nothing was written

        # Columns: code points in the analysis, UTF-16 units in LSP.
        uni = ed.open("uni.py")
        found = await ed.wait_for(lambda: ed.diagnostics(uni, "TRN001"), what="TRN001 in uni.py")
        line = UNICODE.split("\n")[9]
        start = line.index("x * torch")
        assert found[0].range.start == types.Position(9, start + 1)  # 🙂 counts twice
        assert found[0].range.end == types.Position(
            9, start + 1 + len("x * torch.rsqrt(squared + eps)")
        )

        actions = await actions_at(ed, uni, 9, start + 3)
        fixes = [a for a in actions if a.edit is not None]
        assert len(fixes) == 1
        fix = fixes[0]
        assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
        assert fix.title == "Use `torch.rms_norm` (TRN001)"
        assert fix.diagnostics and fix.diagnostics[0].code == "TRN001"
        measure = [a for a in actions if a.command is not None]
        assert [a.command.command for a in measure] == ["trnlens.server.measureFix"]
        assert list(measure[0].command.arguments) == [
            {"uri": uni, "qualname": "rms_é", "code": "TRN001"}
        ]

        fixed = apply_edits(UNICODE, fix.edit.changes[uni])
        assert fixed == apply_fixes(UNICODE, analyse_source(UNICODE, "uni.py"))
        assert 'return tag("é🙂", torch.rms_norm(x, x.shape[-1:], eps=eps)) * weight' in fixed
        assert "rsqrt" not in fixed and "squared" not in fixed
        full_change(ed, uni, fixed)  # the editor applied the edit: the finding goes away
        await ed.wait_for(lambda: not ed.diagnostics(uni, "TRN001"), what="fixed: no TRN001")
        assert await actions_at(ed, uni, 8) == []

        # A noqa comment naming TRN001 on the pattern's line silences it.
        text = (root / "model.py").read_text("utf-8").split("\n")
        ed.edit(uri, NAIVE_RSQRT, len(text[NAIVE_RSQRT]), NOQA)
        await ed.wait_for(lambda: not ed.diagnostics(uri, "TRN001"), what="noqa silences")
        ed.edit(
            uri,
            NAIVE_RSQRT,
            len(text[NAIVE_RSQRT]),
            "",
            end=(NAIVE_RSQRT, len(text[NAIVE_RSQRT]) + len(NOQA)),
        )
        await ed.wait_for(lambda: ed.diagnostics(uri, "TRN001"), what="TRN001 back")

        # trnlens.rules.ignore (and select) from the client's settings.
        ed.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"trnlens": {"rules": {"ignore": ["TRN0"]}}}
            )
        )
        await ed.wait_for(lambda: not ed.diagnostics(uri, "TRN001"), what="rules.ignore")
        assert (await compare_lenses(ed, uri)) == {}
        ed.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"trnlens": {"rules.select": ["TRN001"]}})
        )
        await ed.wait_for(lambda: ed.diagnostics(uri, "TRN001"), what="rules.select")


async def test_profile_figures_compare_lens_and_measure_fix(tmp_path):
    root = workspace(tmp_path)
    async with editor(root) as ed:
        uri = ed.open()
        await ed.wait_for(lambda: ed.diagnostics(uri, "TRN001"), what="TRN001")

        # A Compare lens only where the analysis has a fused alternative.
        lenses = await compare_lenses(ed, uri)
        assert set(lenses) == {"rmsnorm_naive"}
        assert lenses["rmsnorm_naive"].command.title == "⇄ Compare variants"
        assert lenses["rmsnorm_naive"].range.start.line == NAIVE_DEF
        assert (await ed.lenses(uri))["rmsnorm_naive"].command.title == "▶ Profile"

        # After a profile, the finding's message carries what its lines measured.
        _, end = await ed.profile(uri, "rmsnorm_naive")
        assert "6 dispatches" in end.message, end.message

        def measured():
            found = ed.diagnostics(uri, "TRN001")
            return found and "measured:" in found[0].message and found[0]

        diagnostic = await ed.wait_for(measured, what="measured figures in TRN001")
        assert re.search(
            # the lines' time is their share of the unprofiled median when the profiler inflated
            # the steps (agent/basis.py), and then says so
            r"measured: 6 dispatches, [\d.]+ (ns|µs|ms|s) (CPU \(ops\)|unprofiled share) per step "
            r"on lines 14–15 "
            r"\(rmsnorm_naive, just now\) · confirmed by a run \(6 dispatches here\)",
            diagnostic.message,
        ), diagnostic.message
        assert "device" not in diagnostic.message and "not measured" not in diagnostic.message

        # The Compare lens: original, fixed and compiled in one run.
        answer = await ed.click(lenses["rmsnorm_naive"])
        check_comparison(answer)
        ends = [r for r in ed.progress(answer["token"]) if isinstance(r, types.WorkDoneProgressEnd)]
        assert ends and ends[0].message == answer["message"]
        # the toast: the lens's words (a toast cuts long text) with an Open report button
        toast = await ed.wait_for(
            lambda: [q for q in ed.questions if q.message.startswith("trnlens: compared ")],
            what="the comparison's toast",
        )
        assert toast[0].message == f"trnlens: compared rmsnorm_naive: {answer['lens']}"
        assert [a.title for a in toast[0].actions] == ["Open report"]
        title = (await compare_lenses(ed, uri))["rmsnorm_naive"].command.title
        assert re.fullmatch(
            # the age says when the run was made: "N min ago" once a busy machine took minutes
            # a speed-up whose range contains 1.0 reads "no measurable difference"
            # and each variant's peak against the original's, where it differs
            r"⇄ Compare variants · fixed( [\d.]+×|: no measurable difference)(, peak [−+]\d+%)?"
            r" · compiled( [\d.]+×|: no measurable difference)(, peak [−+]\d+%)?"
            r" · 6/2/1 dispatches( · noisy)?"
            r" · (just now|\d+ min ago)",
            title,
        ), title

        # The profile lens keeps showing the function as written: the watcher picks the stored
        # comparison up, but its fixed and compiled variants are not the function's profile.
        await ed.watcher_settled()  # the comparison's store writes are handled by now
        profile = (await ed.lenses(uri))["rmsnorm_naive"].command.title
        assert "· 6 dispatches ·" in profile, profile

        # Measure the fix: the code action's command gives the same comparison.
        actions = await actions_at(ed, uri, NAIVE_RSQRT)
        measure = next(a for a in actions if a.command is not None)
        assert measure.title.startswith("Measure the fix")
        answer = await ed.command(measure.command.command, *measure.command.arguments)
        check_comparison(answer)

        # A function without a fix is refused with a message.
        try:
            await ed.command("trnlens.server.measureFix", {"uri": uri, "qualname": "rmsnorm_fused"})
        except Exception as exc:
            assert "no fix for rmsnorm_fused" in str(exc)
        else:
            raise AssertionError("measureFix of a fused function must be refused")


def check_comparison(answer: dict) -> None:
    variants = answer["variants"]
    assert [v["kind"] for v in variants] == ["function", "source", "compiled"], variants
    assert [v["label"] for v in variants] == [
        "rmsnorm_naive", "rmsnorm_naive (fixed: TRN001)", "rmsnorm_naive (compiled)",
    ]  # fmt: skip
    # The fix keeps `* weight` outside rms_norm (folding it would change the output dtype for a
    # weight of another dtype), so the fixed variant is two dispatches: rms_norm and the mul.
    assert [v["dispatches"] for v in variants] == [6, 2, 1]
    assert all(v["error"] is None for v in variants)
    assert answer["speedups"][0] == 1.0 and all(s and s > 0 for s in answer["speedups"])
    for low, high in answer["speedupRanges"][1:]:
        assert 0 < low <= high
    assert all(d is not None and d < 1e-4 for d in answer["maxAbsDiff"])
    assert answer["timeBasis"] == "cpu" and answer["alreadyPending"] is False
    assert answer["message"].startswith("compared rmsnorm_naive: original 6 dispatches")
    assert "fixed TRN001 2 dispatches" in answer["message"]
    # each variant's memory peak (a fix measured in bytes as well as time), said after its time
    assert all(isinstance(v["peakMemoryBytes"], int) for v in variants), variants
    assert re.search(r"fixed TRN001 2 dispatches, .*, peak [\d.]+ [kKM]?B \([−+±]\d+%\)",
                     answer["message"]), answer["message"]  # fmt: skip
    assert "compiled 1 dispatch" in answer["message"]
