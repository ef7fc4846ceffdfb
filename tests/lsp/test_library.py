"""Library code in the editor (lsp/library.py), from a stored run of the tiny Llama sample.

The run is the hand-written result of tests/libraries/fixtures.py (the attribution pass's
``frames`` and ``modules``, pointing at the installed transformers' real modeling_llama.py),
passed through the real ``libraries.rules.attach`` and stored; the server, started fresh, places
it when the sample opens, as after any run."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from lsprotocol import types
from trnlens.agent import sources
from trnlens.libraries import rules, texts
from trnlens.store import Store

from tests.cli.conftest import REPO
from tests.libraries.fixtures import CALLER, llama_result, modeling_llama

from .session import editor
from .test_e2e_analysis import _command_or_action

SAMPLE = "samples/tiny_llama.py"


def _project(tmp_path):
    root = tmp_path / "project"
    (root / "samples").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n', "utf-8")
    shutil.copy(REPO / SAMPLE, root / SAMPLE)
    store_sample_run(root)
    return root


def store_sample_run(root: Path, modeling: str | None = None) -> None:
    """Stores the tiny Llama sample's run (its library frames in ``modeling``, the installed
    modeling_llama.py by default) in the project at ``root``."""
    text = (root / SAMPLE).read_text("utf-8")
    result = llama_result(modeling)
    result["function"]["source_hash"] = sources.source_hash(
        text, sources.find_definition(text, "logits")
    )
    result["lines"] = [
        {"path": SAMPLE, "line": CALLER["line"], "cpu_us": 5000.0, "device_us": 5000.0,
         "dispatches": 151, "ops": {}},
    ]  # fmt: skip
    rules.attach(result)
    assert result["library_findings"]
    with Store(root) as store:
        store.add(result)


async def test_library_finding_sits_on_the_calling_line_with_hover_and_quick_fix(tmp_path):
    root = _project(tmp_path)
    calling = CALLER["line"] - 1
    async with editor(root) as ed:
        uri = ed.open(SAMPLE)
        found = await ed.wait_for(
            lambda: [d for d in ed.diagnostics(uri, "TRN001") if d.source == "trnlens (library)"],
            what="the library finding on the calling line",
        )
        assert [d.range.start.line for d in found] == [calling]
        assert found[0].message.startswith(
            "LlamaRMSNorm (transformers 4.57.6, modeling_llama.py:62) is a naive RMSNorm: "
            "8 dispatches a call, 5 calls, 40 of 151 per step (measured, logits, "
        )
        assert "modeling_llama.py:66: naive RMSNorm" in found[0].message
        # the way to the library line: a related location (editors make it a link)
        [related] = found[0].related_information
        assert related.location.uri == Path(modeling_llama()).as_uri()
        assert related.location.range.start.line == 65

        hover = await ed.hover(uri, calling, 12)
        text = hover.contents.value
        assert "**library code called here**" in text
        # Shares of the 5.00 ms of attributed time: 300 µs, 900 µs, 160 µs, 3.00 ms.
        # each library line a link to the file at that line
        link = f"({Path(modeling_llama()).as_uri()}#L66)"
        assert (
            f"| [`modeling_llama.py:66 forward`]{link} (transformers 4.57.6) | 6% | 300 µs | 15 |"
            in text
        )
        assert (
            "`linear.py:125 forward`](file://" in text
            and " (torch 2.13.0) | 18% | 900 µs | 14 |" in text
        )
        assert "| `model` | LlamaForCausalLM | 1 | 60% |" in text
        assert "| `model.model` | LlamaModel | 1 | 54% |" in text
        assert "| … 6 more | | | |" in text  # the top 3 modules by total time: a glance
        assert text.index("linear.py:125") < text.index("modeling_llama.py:66")  # by time

        actions = await _actions(ed, uri, found)
        (swap,) = [a for a in actions if a.title.startswith("Swap LlamaRMSNorm.forward")]
        (measure,) = [a for a in actions if a.title.startswith("Measure the swap: logits")]
        assert measure.command.command == "trnlens.server.measureFix"
        assert list(measure.command.arguments) == [
            {"uri": uri, "qualname": "logits", "code": "TRN001"}
        ]
        edits = swap.edit.changes[uri]
        inserted = edits[0].new_text
        assert "from transformers.models.llama.modeling_llama import LlamaRMSNorm" in inserted
        assert "def use_fused_llama_rms_norm(model):" in inserted
        assert "torch.rms_norm(" in inserted
        assert [e.new_text for e in edits[1:]] == ["use_fused_llama_rms_norm(", ")"]
        assert all("site-packages" not in e.new_text for e in edits)


async def _actions(ed, uri: str, diagnostics: list) -> list:
    """The code actions for ``diagnostics``, told apart from commands as an editor does."""
    converter = ed.client.protocol._converter
    converter.register_structure_hook(
        types.Command | types.CodeAction, _command_or_action(converter)
    )
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri),
        range=diagnostics[0].range,
        context=types.CodeActionContext(diagnostics=diagnostics),
    )
    return list(await ed.client.text_document_code_action_async(params) or [])


def _open_path(ed, path: str) -> str:
    """Opens a file outside the project (as go-to-definition into site-packages does)."""
    uri = Path(path).as_uri()
    ed.versions[uri] = 1
    text = Path(path).read_text("utf-8")
    item = types.TextDocumentItem(uri, "python", 1, text)
    ed.client.text_document_did_open(types.DidOpenTextDocumentParams(item))
    return uri


async def test_an_opened_library_file_shows_the_runs_figures(tmp_path):
    root = _project(tmp_path)
    library = modeling_llama()
    async with editor(root) as ed:
        ed.open(SAMPLE)  # the project document the run is placed on
        uri = _open_path(ed, library)
        hints = await ed.hints(uri, lines=200)
        assert {h.position.line + 1: h.label for h in hints} == {
            64: "2% · 100 µs · 5 dispatches",
            65: "4% · 200 µs · 10 dispatches",
            66: "6% · 300 µs · 15 dispatches",
            67: "4% · 200 µs · 10 dispatches",
        }
        found = await ed.wait_for(
            lambda: [d for d in ed.diagnostics(uri) if d.source == "trnlens (library)"],
            what="the finding at the library line",
        )
        assert [d.range.start.line + 1 for d in found] == [66]
        assert "called from samples/tiny_llama.py:34" in found[0].message
        # one warning per finding: no static TRN001 beside it, no edit, no lens in a library
        await ed.analysis_settled()
        assert [d.source for d in ed.diagnostics(uri)] == ["trnlens (library)"]
        assert "adds use_fused_llama_rms_norm()" in found[0].message  # the fix is project-side
        [related] = found[0].related_information
        assert related.location.uri == (root / SAMPLE).as_uri()
        assert related.location.range.start.line == 33
        assert await _actions(ed, uri, found) == []
        # The library file changed since the run read it: its figures say they may be off.
        ed.edit(uri, 0, 0, "# edited\n")
        hints = await ed.hints(uri, lines=200)  # the edit is handled before this request
        assert hints and all(h.label.endswith(" · stale") for h in hints)
        stale = await ed.wait_for(
            lambda: [
                d
                for d in ed.diagnostics(uri)
                if d.message.endswith("changed since the run read it")
            ],
            what="the finding marked stale",
        )
        assert len(stale) == 1


async def test_a_real_run_puts_the_library_finding_on_the_calling_line(tmp_path):
    """The tiny Llama profiled from the editor: the run's attribution, the rules on the library
    code it executed (in the server, off its event loop) and the diagnostic on the calling line."""
    root = tmp_path / "project"
    (root / "samples").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n', "utf-8")
    shutil.copy(REPO / SAMPLE, root / SAMPLE)
    calling = CALLER["line"] - 1
    async with editor(root) as ed:
        uri = ed.open(SAMPLE)
        _, end = await ed.profile(uri, "logits")
        assert "logits" in end.message
        found = await ed.wait_for(
            lambda: [d for d in ed.diagnostics(uri, "TRN001") if d.source == "trnlens (library)"],
            what="the library finding on the calling line",
        )
        assert [d.range.start.line for d in found] == [calling]
        assert found[0].message.startswith(
            "LlamaRMSNorm (transformers 4.57.6, modeling_llama.py:62) is a naive RMSNorm: "
            "8 dispatches a call, 5 calls, 40 of "
        )
        text = (await ed.hover(uri, calling, 12)).contents.value
        assert "**library code called here**" in text
        assert "(transformers 4.57.6) |" in text and "| `model` | LlamaForCausalLM | 1 |" in text

        # Measure the swap from the editor: the comparison compare --fix runs.
        actions = await _actions(ed, uri, found)
        (measure,) = [a for a in actions if a.title.startswith("Measure the swap: logits")]
        answer = await ed.command(measure.command.command, *measure.command.arguments)
        kinds = [row["kind"] for row in answer["variants"]]
        assert kinds == ["function", "swap", "compiled"]
        dispatches = [row["dispatches"] for row in answer["variants"]]
        assert dispatches[0] - dispatches[1] == 20 and answer["maxAbsDiff"][1] == 0.0
        assert f"; fixed TRN001 in LlamaRMSNorm {dispatches[1]:g} dispatches" in answer["message"]


async def test_a_remote_runs_library_file_shows_its_figures_in_the_local_copy(
    tmp_path, monkeypatch
):
    """A run on a remote host names the host's path (not on this machine); its agent sent the
    file's text by digest (libraries/texts.py): the editor shows the run's figures in the local
    copy, and the calling line's finding names where that copy is."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    host_path = "/srv/host-only/site-packages/transformers/models/llama/modeling_llama.py"
    data = Path(modeling_llama()).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    copy = texts.keep(digest, host_path, data)
    root = tmp_path / "project"
    (root / "samples").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n', "utf-8")
    shutil.copy(REPO / SAMPLE, root / SAMPLE)
    text = (root / SAMPLE).read_text("utf-8")
    result = llama_result(host_path)
    result["target"] = "trn2-dev"
    result["function"]["source_hash"] = sources.source_hash(
        text, sources.find_definition(text, "logits")
    )
    result["library_files"] = [
        {"path": host_path, "library": {"name": "transformers", "version": "4.57.6"},
         "sha256": digest, "bytes": len(data)},
    ]  # fmt: skip
    texts.attach(result)
    assert result["library_copies"] == {host_path: str(copy)} and result["library_findings"]
    with Store(root) as store:
        store.add(result)
    async with editor(root) as ed:
        project_uri = ed.open(SAMPLE)
        uri = _open_path(ed, str(copy))
        hints = await ed.hints(uri, lines=200)
        assert {h.position.line + 1: h.label for h in hints} == {
            64: "2% · 100 µs · 5 dispatches",
            65: "4% · 200 µs · 10 dispatches",
            66: "6% · 300 µs · 15 dispatches",
            67: "4% · 200 µs · 10 dispatches",
        }
        found = await ed.wait_for(
            lambda: [
                d for d in ed.diagnostics(project_uri, "TRN001") if d.source == "trnlens (library)"
            ],
            what="the library finding on the calling line",
        )
        assert f"in {host_path}:66 (on trn2-dev; its copy: {copy})" in found[0].message
