"""End to end: a Jupyter notebook over LSP's notebook synchronisation (a real pytest-lsp client
sending ``notebookDocument/didOpen`` and ``didChange``): the static finding as a diagnostic on
its cell, the lens on the cell's function, a run from it placed on the cell's measured line, a
quick fix edit aimed at the cell, and a cell edit moving all of it as a document edit would."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from lsprotocol import types
from trnlens.store import Store

from tests.notebooks import SAMPLE, cell_line

from .session import FAST, editor, workspace


def open_notebook(ed, name: str = "nb.ipynb", notebook: dict | None = None) -> dict[str, str]:
    """Sends the notebook's cells as VS Code does (``notebook``: its JSON, else the file's);
    returns cell id -> cell uri."""
    path = ed.root / name
    notebook = notebook or json.loads(path.read_text("utf-8"))
    cells, documents, uris = [], [], {}
    for cell in notebook["cells"]:
        uri = f"vscode-notebook-cell:{path.as_posix()}#{cell['id']}"
        uris[cell["id"]] = uri
        code = cell["cell_type"] == "code"
        kind = types.NotebookCellKind.Code if code else types.NotebookCellKind.Markup
        cells.append(types.NotebookCell(kind=kind, document=uri))
        language = "python" if code else "markdown"
        documents.append(types.TextDocumentItem(uri, language, 1, "".join(cell["source"])))
    ed.client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            types.NotebookDocument(path.as_uri(), "jupyter-notebook", 1, cells), documents
        )
    )
    return uris


def edit_cell(ed, notebook: str, cell_uri: str, line: int, text: str, version: int) -> None:
    """Inserts ``text`` at the start of ``line`` of the cell, as VS Code sends a cell edit."""
    at = types.Position(line, 0)
    change = types.TextDocumentContentChangePartial(range=types.Range(at, at), text=text)
    ed.client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            types.VersionedNotebookDocumentIdentifier(version, notebook),
            types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            types.VersionedTextDocumentIdentifier(version, cell_uri), [change]
                        )
                    ]
                )
            ),
        )
    )


async def test_notebook_cells_get_findings_lenses_runs_and_fixes(tmp_path):
    root = workspace(tmp_path, f"[tool.trnlens]\nwarmup = {FAST['warmup']}\n")
    shutil.copy(SAMPLE, root / "nb.ipynb")
    _, naive = cell_line(root / "nb.ipynb", "rms-cell", "torch.rsqrt")
    _, def_line = cell_line(root / "nb.ipynb", "rms-cell", "def rms")
    naive, def_line = naive - 1, def_line - 1  # LSP lines are 0-based
    async with editor(root) as ed:
        # What makes VS Code's client send a notebook's cells (the extension's selector,
        # extension/src/selector.ts, names the same notebook type).
        sync = ed.initialized.capabilities.notebook_document_sync
        (selector,) = sync.notebook_selector
        assert selector.notebook == "jupyter-notebook"
        assert [c.language for c in selector.cells] == ["python"]
        uris = open_notebook(ed)
        cell = uris["rms-cell"]

        def finding():
            return ed.diagnostics(cell, "TRN001")

        (diagnostic,) = await ed.wait_for(finding, timeout=60, what="TRN001 on the cell")
        assert diagnostic.range.start.line == naive
        assert not ed.diagnostics(uris["imports"])  # `%matplotlib inline` is no finding

        lenses = await ed.lenses(cell)
        assert lenses["rms"].range.start.line in (def_line - 1, def_line)  # above the def
        assert "rms" not in await ed.lenses(uris["try-it"])  # each cell: its own lenses

        actions = await ed.client.text_document_code_action_async(
            types.CodeActionParams(
                types.TextDocumentIdentifier(cell),
                diagnostic.range,
                types.CodeActionContext(diagnostics=[diagnostic]),
            )
        )
        fix = next(a for a in actions if a.kind == types.CodeActionKind.QuickFix and a.edit)
        ((target, edits),) = fix.edit.changes.items()
        assert target == cell and edits[0].range.start.line == naive  # the cell's own line
        assert "torch.rms_norm" in edits[0].new_text

        _, end = await ed.profile(cell, "rms")
        assert "rms" in end.message

        async def hint_on(line: int):
            found = await ed.hints(cell)
            return [h for h in found if h.position.line == line]

        hints = await hint_on(naive)
        assert hints and "6 dispatches" in str(hints[0].label), [h.label for h in hints]
        hover = await ed.hover(cell, naive, 20)
        assert hover is not None and "dispatch" in hover.contents.value  # the line's figures
        assert hover.range is None or hover.range.start.line == naive

        # A cell edit is a document edit: a line inserted above moves the finding and the run.
        edit_cell(ed, root.joinpath("nb.ipynb").as_uri(), cell, 0, "# tried in a notebook\n", 2)
        moved = await ed.wait_for(
            lambda: [d for d in finding() if d.range.start.line == naive + 1],
            timeout=60,
            what="the finding one line down",
        )
        assert moved
        assert await hint_on(naive + 1) and not await hint_on(naive)


async def test_a_run_of_unsaved_cells_reads_in_its_cells_on_every_surface(tmp_path):
    """Issue 42, point 1: lines added in a cell and not saved. The report (asked from the cell,
    as the palette does) shows the measured line with its figures where the run counted it,
    the hover names the line as the cell numbers it, and the stored run names its cells by the
    file's ids, not by the editor's cell URIs."""
    root = workspace(tmp_path, f"[tool.trnlens]\nwarmup = {FAST['warmup']}\n")
    shutil.copy(SAMPLE, root / "nb.ipynb")
    index, naive = cell_line(root / "nb.ipynb", "rms-cell", "torch.rsqrt")
    async with editor(root) as ed:
        uris = open_notebook(ed)
        cell = uris["rms-cell"]
        await ed.wait_for(lambda: ed.diagnostics(cell, "TRN001"), timeout=60, what="TRN001")
        edit_cell(ed, root.joinpath("nb.ipynb").as_uri(), cell, 0, "# a\n# b\n# c\n", 2)
        naive += 3  # 1-based, in the cell, as the editor shows it now
        await ed.wait_for(
            lambda: [d for d in ed.diagnostics(cell, "TRN001") if d.range.start.line == naive - 1],
            timeout=60,
            what="the finding three lines down",
        )
        await ed.profile(cell, "rms")

        hover = await ed.hover(cell, naive - 1, 20)
        assert hover is not None
        assert hover.contents.value.startswith(f"**line {naive}** (cell {index + 1}) of `rms`")
        # the finding's measured part names the same line the same way (it said the joined
        # cells' line 13, seen in code-server)
        measured = await ed.wait_for(
            lambda: [d for d in ed.diagnostics(cell, "TRN001") if "measured:" in d.message],
            timeout=60,
            what="the measured finding",
        )
        assert f"per step on line {naive} (cell {index + 1}) (rms, " in measured[0].message

        page = await ed.command("trnlens.server.report", {"uri": cell, "qualname": "rms"})
        html = Path(page["path"]).read_text("utf-8")
        rows = re.findall(
            r'<tr class="src( measured)?"[^>]*><td class="num">cell (\d+):(\d+)<', html
        )
        assert (" measured", str(index + 1), str(naive)) in rows, rows  # the line with its figures
        assert all(int(line) <= naive for _, _, line in rows)  # no row beyond the function

    with Store(root) as store:
        run = store.latest("nb.ipynb", "rms")
    stored = {c["index"]: c["id"] for c in run["notebook"]["cells"]}
    assert stored[index] == "rms-cell"  # edited, in its place: the file's id
    assert not any(i.startswith("vscode-notebook-cell:") for i in stored.values())
