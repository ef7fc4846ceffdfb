"""The run report from the editor: ``trnlens.server.report``, a lens after a run, a hover link.

The command builds (or reuses) the run's HTML page off the event loop (a large chrome trace takes
seconds to stream) and answers where it is; with ``show`` it also asks the client to show the
page (``window/showDocument``, external: a browser). The VS Code extension intercepts the same
command to open the page in a webview beside the code instead, and turns the page's clicks into
revealed source lines.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

from lsprotocol import types

from trnlens.lsp import markdown
from trnlens.lsp.command_args import ReportArgument
from trnlens.lsp.command_ids import REPORT
from trnlens.lsp.context import Context
from trnlens.lsp.documents import Placement, ProfiledDocument
from trnlens.report import build


class ReportRefused(Exception):
    pass


def code_lenses(doc: ProfiledDocument) -> list[types.CodeLens]:
    """``▦ Report`` beside each function that has a run (placed after the ▶ Profile lens)."""
    analysis = doc.analysis()
    if analysis is None or not analysis.imports_torch or doc.read_only:
        return []
    lenses = []
    for qualname, placement in doc.placements.items():
        symbol = analysis.symbols.get(qualname)
        line = analysis.header_line_now(symbol) if symbol else None
        if symbol is None or line is None:
            continue
        position = types.Position(line, symbol.def_column)
        arguments = [_arguments(doc, placement, show=True)]
        command = types.Command("▦ Report", REPORT, arguments=arguments)
        lenses.append(types.CodeLens(types.Range(position, position), command))
    return lenses


def _arguments(doc: ProfiledDocument, placement: Placement, show: bool = False) -> dict:
    return {
        "uri": doc.uri,
        "qualname": placement.result.qualname,
        "runId": placement.result.run_id,
        "show": show,
    }


def hover_link(doc: ProfiledDocument, placement: Placement) -> str:
    """A Markdown line: the report as a command link (VS Code runs it) and as a CLI command."""
    arguments = quote(json.dumps([_arguments(doc, placement, show=True)]))
    cli = markdown.code(f"trnlens report {placement.result.run_id}")
    return f"[Open run report](command:{REPORT}?{arguments}) ({cli}): every op, line and module"


async def report(ctx: Context, arg: ReportArgument) -> dict[str, Any]:
    """-> {path, uri, root, runIds, reused, title}: the run ``runId``, else the run the lens of
    uri/qualname shows (else the document's newest shown run when no qualname is given), else
    the latest stored run of uri/qualname, else the project's latest run."""
    uri, qualname, run_id = arg.uri, arg.qualname, arg.run_id
    if not run_id and uri:
        run_id = shown_run(ctx.documents.get(uri), qualname)
    relpath: str | None
    if uri:
        root, relpath = ctx.root_and_relpath(ctx.path_of(uri))
    else:
        root, relpath = ctx.default_root(), None
    store = ctx.store(root)
    if store is None:
        raise ReportRefused("no runs stored in this project yet: profile a function first")
    if run_id:
        what = run_id
    elif qualname and relpath:
        what = f"{root / relpath}::{qualname}"
    else:
        what = None
    try:
        runs = build.select(store, what, root)  # SQLite: on this thread, it is quick
        # Streaming the trace and writing the page: off the event loop.
        built = await asyncio.to_thread(build.write, store, runs, root)
    except (build.ReportError, OSError) as exc:
        raise ReportRefused(str(exc)) from None
    page = built.path.as_uri()
    if arg.show:
        ctx.client.show_document(page)
    return {
        "path": str(built.path),
        "uri": page,
        "root": str(root),
        "runIds": built.run_ids,
        "reused": built.reused,
        "title": _title(runs),
    }


def shown_run(doc: ProfiledDocument | None, qualname: str | None) -> str | None:
    """The run id the editor shows for ``qualname`` (its lens's run: after an Undo, the earlier
    run that measured the text, not the newest stored one), or the newest of the document's
    shown runs; None when it shows none."""
    if doc is None:
        return None
    if qualname:
        placement = doc.placements.get(qualname)
        return placement.result.run_id if placement is not None else None
    shown = [p.result for p in doc.placements.values()]
    if not shown:
        return None
    return max(shown, key=lambda r: str(r.data.get("created_at"))).run_id


def _title(runs: list[dict]) -> str:
    """A tab title a user can tell apart from the others: the function, not the run id."""
    qualname = ((runs[0].get("function") or {}).get("qualname") if runs else None) or "run"
    if len(runs) > 1:
        return f"Compare {qualname} ({len(runs)} variants)"
    return f"Report {qualname}"
