"""End to end, the walk of issue 33: what a user meets in the editor on a real model.

A library file is read-only to trnlens; a run is stale when project code it executed outside the
function changed; the inputs quick fix reuses a fitting factory (a transformers model then
profiles); Show Run Report opens the lens's run; Compare is offered without a finding; the hover
is short and ends with the report link."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from .session import editor, workspace
from .test_e2e_analysis import actions_at

NAIVE = (Path(__file__).parent / "fixtures" / "model.py").read_text("utf-8")

HELPERS = """import torch


def double(x):
    return torch.mul(x, 2)


def unrelated(x):
    return x - 1
"""

CALLER = """import torch
from helpers import double

SCALE = 3.0


def inputs():
    return (torch.randn(8, 8),)


# trnlens: inputs=inputs
def scaled(x):
    y = double(x)
    y = torch.add(y, 1)
    y = torch.sub(y, 1)
    y = torch.mul(y, SCALE)
    y = torch.div(y, 2)
    y = torch.relu(y)
    return torch.sigmoid(y)


def other(x):
    return x
"""

HF_MODEL = """import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
CONFIG = LlamaConfig(
    hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
    num_key_value_heads=2, vocab_size=100, max_position_embeddings=64,
)
model = LlamaForCausalLM(CONFIG).eval()


def ids():
    return torch.randint(0, 100, (1, 16))


def logits(input_ids):
    return model(input_ids).logits
"""


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    """Insertions applied as an editor does: each against the original text, in order."""
    lines = text.splitlines(keepends=True)
    inserted: dict[int, str] = {}
    for edit in edits:
        assert edit.range.start == edit.range.end and edit.range.start.character == 0
        inserted[edit.range.start.line] = inserted.get(edit.range.start.line, "") + edit.new_text
    return "".join(inserted.get(i, "") + line for i, line in enumerate(lines))


async def _raw_lenses(ed, uri: str) -> list[types.CodeLens]:
    found = await ed.client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri))
    )
    return [
        lens if lens.command else await ed.client.code_lens_resolve_async(lens)
        for lens in found or []
    ]


async def test_a_site_packages_file_gets_no_edit_fix_no_lens_and_no_static_warning(tmp_path):
    root = workspace(tmp_path)
    library = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "norms" / "core.py"
    library.parent.mkdir(parents=True)
    library.write_text(NAIVE, "utf-8")
    (root / "inside.py").write_text(NAIVE, "utf-8")  # the same text in the project
    async with editor(root) as ed:
        inside = ed.open("inside.py")
        uri = library.as_uri()
        ed.versions[uri] = 1
        ed.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, NAIVE))
        )
        await ed.analysis_settled()
        line = next(i for i, t in enumerate(NAIVE.splitlines()) if "rsqrt" in t)
        # in the project: the finding, its fix, Profile and Compare lenses
        assert ed.diagnostics(inside, "TRN001")
        assert any("torch.rms_norm" in a.title for a in await actions_at(ed, inside, line))
        assert any("Profile" in lens.command.title for lens in await _raw_lenses(ed, inside))
        # Measure the fix from the lightbulb on the def line too, not only on the finding
        header = next(i for i, t in enumerate(NAIVE.splitlines()) if "def rmsnorm_naive" in t)
        titles = [a.title for a in await actions_at(ed, inside, header, 4)]
        assert "Measure the fix: rmsnorm_naive vs fixed vs torch.compile (trnlens)" in titles
        # in site-packages: nothing to edit or run
        assert await actions_at(ed, uri, line) == []
        assert await _raw_lenses(ed, uri) == []
        assert ed.diagnostics(uri) == []


async def test_a_run_is_stale_when_code_it_executed_outside_the_function_changed(tmp_path):
    root = workspace(tmp_path)
    (root / "helpers.py").write_text(HELPERS, "utf-8")
    (root / "caller.py").write_text(CALLER, "utf-8")
    scale = CALLER.splitlines().index("SCALE = 3.0")

    async def title() -> str:
        return (await ed.lenses(uri))["scaled"].command.title

    async with editor(root) as ed:
        uri = ed.open("caller.py")
        await ed.profile(uri, "scaled")
        assert "stale" not in await title()
        # the hover: short, the top ops, then the link to the report for the rest
        [header] = [i for i, t in enumerate(CALLER.splitlines()) if t.startswith("def scaled")]
        hover = (await ed.hover(uri, header, 5)).contents.value
        assert "| … 1 more |" in hover  # 6 ops, the top 5 shown
        assert "[Open run report](command:trnlens.server.report?" in hover

        # module-level code the run executed (the import built SCALE) changed: stale
        ed.edit(uri, scale, 0, "SCALE = 4.0", end=(scale, 11))
        assert "stale" in await title()
        ed.edit(uri, scale, 0, "SCALE = 3.0", end=(scale, 11))
        assert "stale" not in await title()
        # a function the run never entered: not stale
        ed.edit(uri, len(CALLER.splitlines()) - 1, 0, "    x = x * 1\n")
        assert "stale" not in await title()

        # the helper it called, in another file: open and edited, then closed (the disk again)
        helpers = ed.open("helpers.py")
        ed.edit(helpers, 8, 0, "    x = x + 0\n")  # in unrelated(): never ran
        assert "stale" not in await title()
        ed.edit(helpers, 4, 0, "    x = x + 0\n")  # in double(): ran
        assert "stale" in await title()
        ed.client.text_document_did_close(
            types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(helpers))
        )
        assert "stale" not in await title()
        (root / "helpers.py").write_text(HELPERS.replace("torch.mul(x, 2)", "x * 2"), "utf-8")
        assert "stale" in await title()


async def test_show_run_report_opens_the_run_the_lens_shows(tmp_path):
    root = workspace(tmp_path)
    text = (root / "model.py").read_text("utf-8")
    body = next(i for i, line in enumerate(text.splitlines()) if "torch.rms_norm" in line)
    async with editor(root) as ed:
        uri = ed.open()
        await ed.profile(uri, "rmsnorm_fused")
        ed.edit(uri, body, 0, "    x = x * 1.0\n")
        await ed.profile(uri, "rmsnorm_fused")
        ed.edit(uri, body, 0, "", end=(body + 1, 0))  # Undo: the first run is shown again
        history = await ed.command(
            "trnlens.server.history", {"uri": uri, "qualname": "rmsnorm_fused"}
        )
        newest, first = history["runs"][0]["run_id"], history["runs"][1]["run_id"]
        assert "· 1 dispatch ·" in (await ed.lenses(uri))["rmsnorm_fused"].command.title
        report = await ed.command(
            "trnlens.server.report", {"uri": uri, "qualname": "rmsnorm_fused"}
        )
        assert report["runIds"] == [first] and first != newest
        # the file's report (no function at the cursor): its newest shown run, not the store's
        report = await ed.command("trnlens.server.report", {"uri": uri})
        assert report["runIds"] == [first]


async def test_compare_is_offered_without_a_finding_as_written_vs_compiled(tmp_path):
    root = workspace(tmp_path)
    async with editor(root) as ed:
        uri = ed.open()
        await ed.analysis_settled()
        before = [lens.command.title for lens in await _raw_lenses(ed, uri)]
        assert not any("torch.compile" in t for t in before)  # not profiled yet
        await ed.profile(uri, "rmsnorm_fused")  # no finding: already fused
        [compare] = [
            lens
            for lens in await _raw_lenses(ed, uri)
            if lens.command.command == "trnlens.server.compare"
            and lens.command.arguments[0]["qualname"] == "rmsnorm_fused"
        ]
        assert compare.command.title == "⇄ Compare with torch.compile"
        answer = await ed.click(compare)
        assert [row["kind"] for row in answer["variants"]] == ["function", "compiled"]
        assert answer["message"].startswith("compared rmsnorm_fused: original 1 dispatch")


async def _profile(ed, uri: str, qualname: str):
    """Profiles by the command (a function reading no torch name has no lens until its first
    run; the command palette's Profile does this)."""
    answer = await ed.command("trnlens.server.profile", {"uri": uri, "qualname": qualname})
    return answer, await ed.wait_for_end(answer["token"])


async def test_the_inputs_quick_fix_reuses_the_ids_factory_and_the_llama_then_profiles(tmp_path):
    root = workspace(tmp_path)
    (root / "hf_model.py").write_text(HF_MODEL, "utf-8")
    async with editor(root) as ed:
        uri = ed.open("hf_model.py")
        _, end = await _profile(ed, uri, "logits")
        assert end.message.startswith("failed: logits(input_ids) needs arguments"), end.message
        assert (await ed.lenses(uri))["logits"].command.title == "▶ Profile · failed: needs inputs"
        [diagnostic] = await ed.wait_for(
            lambda: ed.diagnostics(uri, "missing-inputs"), what="the missing-inputs warning"
        )
        [fix] = [
            a
            for a in await actions_at(ed, uri, diagnostic.range.start.line)
            if isinstance(a, types.CodeAction) and "inputs" in a.title
        ]
        assert fix.title == "Use ids() as the inputs of logits (trnlens)" and fix.is_preferred
        text = _apply(HF_MODEL, fix.edit.changes[uri])
        assert "# trnlens: inputs=ids\ndef logits(input_ids):" in text
        assert text.count("def ") == 2  # no new factory: the user's own
        lines = HF_MODEL.splitlines(keepends=True)
        ed.edit(uri, 0, 0, text, end=(len(lines), 0))
        _, end = await _profile(ed, uri, "logits")
        assert end.message.startswith("logits: "), end.message
        title = (await ed.lenses(uri))["logits"].command.title
        assert "dispatches" in title and "failed" not in title

        # the directive removed again: the click needs inputs, over the good run's figures
        directive = text.splitlines().index("# trnlens: inputs=ids")
        ed.edit(uri, directive, 0, "", end=(directive + 1, 0))
        _, end = await _profile(ed, uri, "logits")
        assert end.message.startswith("failed: "), end.message
        assert (await ed.lenses(uri))["logits"].command.title == "▶ Profile · failed: needs inputs"
