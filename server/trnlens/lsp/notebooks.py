"""Jupyter notebooks in the editor: LSP's notebook synchronisation, and every request on a cell
answered as the notebook's.

An open notebook is one document to the features: its uri is the notebook's, its path the
``.ipynb`` file's, its text the Python cells joined as the agent and ``trnlens check`` join them
(agent/notebook/cells.py), so a run of a function defined in a cell (from a lens, the CLI or the
``%trnlens`` magic) is placed on it like any run on a file. A request on a cell (code lens, code
action, inlay hint, hover) is moved into the joined text, answered there, and its answer moved
back: only what lies in that cell, with the cell's own lines; an edit in another cell (an import
a fix adds) goes to that cell's uri. Diagnostics are published per cell. A cell edit re-joins the
cells and updates the document as a whole-text change (its runs' lines follow by a line diff).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from lsprotocol import types

from trnlens.agent.notebook import cells
from trnlens.lsp import lifecycle, wire
from trnlens.lsp.documents import ProfiledDocument
from trnlens.lsp.errors import guarded
from trnlens.lsp.services import Services

# VS Code's Jupyter notebooks, Python cells only: the client sends those cells (and no others).
SYNC_OPTIONS = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(
            cells=[types.NotebookCellLanguage(language="python")], notebook="jupyter-notebook"
        )
    ]
)

_CONVERTER = wire.shared_converter()


def joined(
    client_cells: list[tuple[str, bool, str, str]], saved: list[tuple[str, str]] | None = None
) -> tuple[cells.Joined, str]:
    """The editor's cells ``(uri, is_code, language, text)`` joined (each cell's id is its uri:
    requests on a cell are routed by it), and the notebook as JSON with those cells: what a run
    ships when the buffer is unsaved. There each cell has the notebook file's own id (nbformat
    4.5's; ``saved``: the file's cells as (source, id)), or none: a stored run names its cells by
    index and id, never by the editor's cell URI."""
    made = cells.join(
        (i, uri, text, is_code and language == "python")
        for i, (uri, is_code, language, text) in enumerate(client_cells)
    )
    ids = _saved_ids([text for *_, text in client_cells], saved or [])
    notebook = {
        "cells": [
            {
                "cell_type": "code" if is_code else "markdown",
                **({"id": id_} if id_ else {}),
                "metadata": {"vscode": {"languageId": language}},
                "source": text,
            }
            for (_uri, is_code, language, text), id_ in zip(client_cells, ids, strict=True)
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return made, json.dumps(notebook)


def _saved_ids(texts: list[str], saved: list[tuple[str, str]]) -> list[str | None]:
    """Each editor cell's id in the file: the cell of the same text (when one cell holds it),
    else, while the file has as many cells, the one in its place (a cell edited, not moved)."""
    holders: dict[str, list[str]] = {}
    for source, id_ in saved:
        holders.setdefault(source, []).append(id_)
    in_place = len(saved) == len(texts)
    found: list[str | None] = []
    used: set[str] = set()
    for i, text in enumerate(texts):
        same = holders.get(text, [])
        id_ = same[0] if len(same) == 1 else saved[i][1] if in_place else ""
        found.append(id_ if id_ and id_ not in used else None)
        used.add(id_)
    return found


def saved_cells(text: str) -> list[tuple[str, str]]:
    """A notebook file's cells as (source, id); [] when it is not a notebook."""
    try:
        notebook = cells.read(text)
    except cells.NotebookError:
        return []
    return [
        (cells.cell_source(cell), str(cell.get("id") or ""))
        for cell in notebook["cells"]
        if isinstance(cell, dict)
    ]


async def _read_saved_cells(doc: ProfiledDocument) -> list[tuple[str, str]]:
    """The file's cells, read once when the notebook opens (off the event loop: a notebook with
    outputs can be megabytes)."""
    try:
        text = await asyncio.to_thread(doc.path.read_text, "utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    return await asyncio.to_thread(saved_cells, text)


def _adopt_cells(app: Services, doc: ProfiledDocument) -> cells.Joined | None:
    found = app.ctx.client.notebook_cells(doc.uri)
    if found is None:
        return None
    made, buffer = joined(found, doc.saved_cells)
    for cell in doc.cells.cells if doc.cells else ():
        app.ctx.cells.pop(cell.id, None)
    for cell in made.cells:
        app.ctx.cells[cell.id] = doc.uri
    doc.cells, doc.notebook_json = made, buffer
    return made


@guarded(None)
async def did_open(app: Services, params: types.DidOpenNotebookDocumentParams) -> None:
    ctx = app.ctx
    uri = params.notebook_document.uri
    found = ctx.client.notebook_cells(uri)
    if found is None:
        return
    made, _ = joined(found)
    doc = ctx.add_document(uri, made.text, notebook=True)
    if doc is None:
        return
    # The cells are routed at once: a request on one (a lens asked right after the open) waits
    # for the notebook's open, which reads the file's cell ids off the loop, then its runs.
    _adopt_cells(app, doc)

    async def read_cell_ids() -> None:
        doc.saved_cells = await _read_saved_cells(doc)
        if ctx.documents.get(uri) is doc:
            _adopt_cells(app, doc)

    await lifecycle.prepare_and_publish(app, doc, read_cell_ids)


@guarded(None)
def did_change(app: Services, params: types.DidChangeNotebookDocumentParams) -> None:
    doc = app.ctx.documents.get(params.notebook_document.uri)
    if doc is None:
        return
    made = _adopt_cells(app, doc)
    if made is None or made.text == doc.text:
        return
    doc.update(made.text, [types.TextDocumentContentChangeWholeDocument(text=made.text)])
    lifecycle.after_edit(app, doc)


@guarded(None)
def did_close(app: Services, params: types.DidCloseNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    doc = app.ctx.documents.get(uri)
    if doc is not None and doc.cells is not None:
        app.ctx.publish_cells(doc, [], force=True)
        for cell in doc.cells.cells:
            app.ctx.cells.pop(cell.id, None)
    lifecycle.close(app, uri)


# The params of the requests ``in_cells`` answers on a cell: unstructured to be moved.
CELL_PARAMS = [
    types.CodeLensParams,
    types.CodeActionParams,
    types.InlayHintParams,
    types.HoverParams,
]


def in_cells(handler: Any) -> Any:
    """``handler(app, params)`` answering requests on notebook cells too (see the docstring)."""

    async def call(app: Services, params: Any) -> Any:
        uri = params.text_document.uri
        notebook_uri = app.ctx.cells.get(uri)
        doc = app.ctx.documents.get(notebook_uri) if notebook_uri else None
        found = doc.cells.cells if doc is not None and doc.cells is not None else ()
        cell = next((c for c in found if c.id == uri), None)
        if doc is None or cell is None:  # a file, or a cell gone meanwhile: nothing to move
            return await handler(app, params)
        raw = _moved(_CONVERTER.unstructure(params), cell.start - 1)
        raw["textDocument"]["uri"] = doc.uri
        answer = await handler(app, _CONVERTER.structure(raw, type(params)))
        return _to_cell(_CONVERTER.unstructure(answer), doc, cell)

    call.__name__ = handler.__name__
    return call


def _moved(value: Any, lines: int) -> Any:
    """A JSON value with every position (``{line, character}``) moved by ``lines``."""
    if isinstance(value, list):
        return [_moved(v, lines) for v in value]
    if not isinstance(value, dict):
        return value
    if value.keys() == {"line", "character"}:
        return {"line": value["line"] + lines, "character": value["character"]}
    return {k: _moved(v, lines) for k, v in value.items()}


def _anchor(item: Any) -> int | None:
    """The joined line an answer's item is at (None: an item with no place, kept)."""
    if not isinstance(item, dict):
        return None
    where = (item.get("range") or {}).get("start") or item.get("position")
    return where.get("line") if isinstance(where, dict) else None


def _to_cell(answer: Any, doc: ProfiledDocument, cell: cells.Cell) -> Any:
    shift = cell.start - 1
    if isinstance(answer, list):
        kept = [
            item
            for item in answer
            if _anchor(item) is None or cell.contains(_anchor(item) + 1)  # type: ignore[operator]
        ]
        return [_item_in_cell(item, doc, shift) for item in kept]
    if isinstance(answer, dict):
        return _item_in_cell(answer, doc, shift)
    return answer


def _item_in_cell(item: Any, doc: ProfiledDocument, shift: int) -> Any:
    if not isinstance(item, dict):
        return item
    edit = item.pop("edit", None)
    moved = _moved(item, -shift)
    if isinstance(edit, dict):
        moved["edit"] = _edit_in_cells(edit, doc)
    return moved


def _edit_in_cells(edit: dict, doc: ProfiledDocument) -> dict:
    """A WorkspaceEdit on the notebook's joined text as edits on its cells' uris."""
    assert doc.cells is not None
    changes: dict[str, list] = {}
    for uri, edits in (edit.get("changes") or {}).items():
        if uri != doc.uri:
            changes.setdefault(uri, []).extend(edits)
            continue
        for text_edit in edits:
            located = doc.cells.locate(text_edit["range"]["start"]["line"] + 1)
            if located is None:
                continue
            cell, _ = located
            changes.setdefault(cell.id, []).append(_moved(text_edit, -(cell.start - 1)))
    return {**edit, "changes": changes}
