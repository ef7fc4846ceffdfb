"""Handlers of the document requests: code lenses and their resolve, code actions, inlay hints,
hovers. Module-level functions of the services and the request's params; ``server.py``
registers them. Each feature's failure costs only its own part of an answer (``guarded``)."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from trnlens.lsp import (
    actions,
    hints,
    hovers,
    lenses,
    library,
    memory,
    missing_inputs,
    rank_hints,
    run_findings,
    xla_figures,
)
from trnlens.lsp import report as run_report
from trnlens.lsp.errors import guarded
from trnlens.lsp.runs import target_nproc
from trnlens.lsp.services import Services
from trnlens.lsp.wire import JsonLenses


@guarded([])
async def code_lens(app: Services, params: types.CodeLensParams) -> list[Any]:
    ctx = app.ctx
    doc = await ctx.document(params.text_document.uri)
    if doc is None:
        return []
    settings = ctx.settings_for(doc.root)
    # Compare lenses first: an editor shows them before ▶ Profile on the same line.
    compare = guarded([])(app.analysis.lenses)(doc, settings.target)
    pending = app.runs.pending(doc.uri)
    # JSON dicts from the cache (see lsp/wire.py): unchanged lenses are not rebuilt.
    ranks = target_nproc(settings.targets.get(settings.target), strict=False)
    profile = await app.lenses.lenses_off_loop(
        doc, settings.target, settings.lens_placement, pending, ranks
    )
    # The report lens first: clients that key lenses by function keep the Profile lens.
    return JsonLenses(guarded([])(run_report.code_lenses)(doc) + compare + profile)


@guarded(None)
async def code_lens_resolve(app: Services, lens: types.CodeLens) -> types.CodeLens:
    data = lens.data if isinstance(lens.data, dict) else {}
    if data.get("kind") != lenses.KIND:
        return lens
    doc = await app.ctx.document(str(data.get("uri")))
    return lenses.resolve(doc, lens, app.runs.job_state, app.watching.lens_label)


@guarded([])
async def code_action(app: Services, params: types.CodeActionParams) -> list[types.CodeAction]:
    doc = await app.ctx.document(params.text_document.uri)
    if doc is None or doc.read_only:
        return []  # no edit to an installed library or the standard library (lsp/readonly.py)
    await app.analysis.analysed(doc)  # off the loop: actions.code_actions reads the cache
    return (
        missing_inputs.code_actions(doc, params)
        + actions.code_actions(app.analysis, doc, params)
        + run_findings.code_actions(doc, params)
        + library.code_actions(doc, params)
    )


@guarded([])
async def inlay_hint(app: Services, params: types.InlayHintParams) -> list[types.InlayHint]:
    ctx = app.ctx
    doc = await ctx.document(params.text_document.uri)
    if doc is None or not ctx.settings_for(doc.root).hints_enabled:
        return []
    # every line's hints together within VS Code's default length (hints.fitted)
    return hints.fitted(
        hints.labelled(doc, params.range)
        + rank_hints.labelled(doc, params.range)
        + xla_figures.labelled(doc, params.range)
        + memory.labelled(doc, params.range)
        + library.labelled(doc, ctx.documents.values(), params.range)
    )


@guarded(None)
async def hover(app: Services, params: types.HoverParams) -> types.Hover | None:
    ctx = app.ctx
    doc = await ctx.document(params.text_document.uri)
    if doc is None:
        return None
    store = ctx.store(doc.root)
    artifacts = store.artifacts if store else None
    placement = hovers.placement_at(doc, params.position) if artifacts else None
    if artifacts is not None and placement is not None:  # its run folder's walk, off the loop
        await asyncio.to_thread(hovers.neuron_lines, artifacts / placement.result.run_id)
        if ctx.documents.get(doc.uri) is not doc:
            return None  # closed meanwhile
    compared = app.analysis.compared(doc.uri)
    # a declared Markdown parser renders &nbsp;
    return hovers.hover(doc, params.position, artifacts, compared, ctx.client.markdown())
