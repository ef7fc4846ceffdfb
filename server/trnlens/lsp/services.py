"""The language server's services, made once per connection and handed to every handler.

:func:`build` makes the context and the services on it and registers each diagnostics provider
(``publishDiagnostics`` replaces a document's whole set, so they are collected together, each
under its own key). Handlers (``handlers.py``, ``commands.py``) take :class:`Services`; the
features below them take only the parts they use.
"""

from __future__ import annotations

from dataclasses import dataclass

from trnlens.lsp import (
    compiled,
    diagnostics,
    library,
    memory,
    missing_inputs,
    run_findings,
    xla_figures,
)
from trnlens.lsp.analysis import AnalysisService
from trnlens.lsp.context import Client, Context
from trnlens.lsp.documents import ProfiledDocument
from trnlens.lsp.lenses import LensCache
from trnlens.lsp.open_explorer import Tunnels
from trnlens.lsp.runs import Runs
from trnlens.lsp.watching import Watching
from trnlens.settings import Settings


@dataclass
class Services:
    ctx: Context
    runs: Runs  # profile and comparison requests, their queue and agents
    analysis: AnalysisService  # static analysis, the Compare lens, comparisons
    watching: Watching  # the disk, runs stored by others, history and regressions
    lenses: LensCache
    tunnels: Tunnels  # Neuron Explorer's SSH tunnels


def build(client: Client) -> Services:
    ctx = Context(client)
    runs = Runs(ctx)
    analysis = AnalysisService(ctx, runs)
    watching = Watching(ctx, runs)
    runs.before_show = watching.settle_change
    hub = ctx.diagnostics
    hub.register("profile.hotspots", diagnostics.hotspots)
    hub.register("profile.failures", diagnostics.failures)
    hub.register("profile.compile", compiled.diagnostics)
    hub.register("profile.xla", xla_figures.diagnostics)
    hub.register("profile.findings", run_findings.provider)
    hub.register("profile.memory", memory.diagnostics)

    # Library findings sit on the calling line, and on their own line in an open library file.
    def library_diagnostics(doc: ProfiledDocument, _: Settings) -> list:
        return library.diagnostics(doc, ctx.documents.values())

    hub.register("profile.library", library_diagnostics)
    hub.register("profile.inputs", missing_inputs.provider)
    hub.register("analysis", analysis.provider)
    hub.register("history.regressions", watching.regressions)
    return Services(ctx, runs, analysis, watching, LensCache(), Tunnels())
