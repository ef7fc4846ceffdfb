"""The pygls server: LSP methods wired to one module per feature, plus the state they share.

Handlers stay thin and never block: anything long (a profile) runs as an asyncio task (see
``runs``), so lenses, hints and hovers are answered while a run goes. Each feature's errors are
logged on their own and answered with an empty result, so one failing feature never takes the
others down.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from trnlens import __version__, project
from trnlens.lsp import (
    actions,
    commands,
    compiled,
    diagnostics,
    hints,
    hovers,
    lenses,
    library,
    missing_inputs,
    rank_hints,
    run_findings,
    wire,
)
from trnlens.lsp import report as run_report
from trnlens.lsp.analysis import AnalysisService
from trnlens.lsp.config import Config
from trnlens.lsp.documents import ProfiledDocument
from trnlens.lsp.runs import Runs, latest_profile, target_nproc
from trnlens.lsp.watching import install as install_watching
from trnlens.results import Result, SchemaMismatch
from trnlens.store import Store, StoreError

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


class TrnlensServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("trnlens", __version__, converter_factory=wire.converter)
        self.config = Config()
        self.documents: dict[str, ProfiledDocument] = {}
        self.runs = Runs(self)
        self.diagnostics = diagnostics.DiagnosticsHub()
        # Static analysis registers its provider beside these under its own key.
        self.diagnostics.register("profile.hotspots", diagnostics.hotspots)
        self.diagnostics.register("profile.failures", diagnostics.failures)
        self.diagnostics.register("profile.compile", compiled.diagnostics)
        self.diagnostics.register("profile.findings", run_findings.provider)
        # Library findings sit on the calling line, and on their own line in an open library file.
        self.diagnostics.register(
            "profile.library", lambda doc, _: library.diagnostics(doc, self.documents.values())
        )
        self.diagnostics.register("profile.inputs", missing_inputs.provider)
        self.analysis = AnalysisService(self)
        self.lenses = lenses.LensCache()
        self.diagnostics.register("analysis", self.analysis.provider)
        self._stores: dict[Path, Store] = {}
        self._generations = itertools.count(1)
        self._published: dict[str, int] = {}
        self._told: dict[Path, str] = {}  # settings problems already shown, by root

    # -- paths, projects, stores
    def path_of(self, uri: str) -> Path:
        path = to_fs_path(uri)
        if path is None:
            raise commands.CommandError(f"not a file: {uri}")
        return Path(path)

    def root_and_relpath(self, path: Path) -> tuple[Path, str]:
        root = project.find_root(path)
        try:
            return root, path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return root, path.as_posix()

    def roots(self) -> set[Path]:
        found = {doc.root for doc in self.documents.values()}
        for folder in self.workspace.folders.values():
            path = to_fs_path(folder.uri)
            if path:
                found.add(Path(path))
        return found

    def default_root(self) -> Path:
        root = self.workspace.root_path
        if root:
            return Path(root)
        return next(iter(self.roots()), Path.cwd())

    def store(self, root: Path, create: bool = False) -> Store | None:
        """The project's store; without ``create``, None when no run was ever stored there (so
        that merely opening a file writes nothing into the user's project)."""
        root = root.resolve()
        if root not in self._stores:
            if not create and not (root / ".trnlens" / "runs.sqlite").exists():
                return None
            store = self._stores[root] = Store(root)  # StoreError: the caller says why
            if store.recovered:
                self.show(f"trnlens: {store.recovered}", types.MessageType.Warning)
        return self._stores[root]

    def unsaved_files(self, root: Path) -> dict[str, str]:
        """Open documents of this project whose text differs from the file on disk."""
        files = {}
        for doc in self.documents.values():
            if doc.root != root:
                continue
            try:
                on_disk = doc.path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                on_disk = None
            if on_disk != doc.text:
                files[str(doc.path)] = doc.text
        return files

    # -- documents
    def open_document(self, uri: str, text: str) -> ProfiledDocument | None:
        path = to_fs_path(uri)
        if path is None or not path.endswith((".py", ".pyi")):
            return None
        root = project.find_root(path)
        doc = ProfiledDocument(uri, Path(path), root, text, next(self._generations))
        self.documents[uri] = doc
        self._load_stored(doc)
        return doc

    def _load_stored(self, doc: ProfiledDocument) -> None:
        """Reopening the editor shows the last run of each function, from the store."""
        try:
            store = self.store(doc.root)
        except StoreError as exc:  # the document still opens, analysed, without stored runs
            self.show(f"trnlens: {exc}", types.MessageType.Warning)
            return
        analysis = doc.analysis()
        if store is None or analysis is None:
            return
        for qualname in analysis.symbols:
            found = latest_profile(store, doc.relpath, qualname)  # not a fixed/compiled variant
            if found is None:
                continue
            try:
                doc.place(Result.parse(found))
            except SchemaMismatch as exc:
                log.warning("ignoring stored run of %s: %s", qualname, exc)

    # -- telling the client
    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def refresh_lenses(self) -> None:
        workspace = self.client_capabilities.workspace
        if workspace and workspace.code_lens and workspace.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)

    def refresh_hints(self) -> None:
        workspace = self.client_capabilities.workspace
        if workspace and workspace.inlay_hint and workspace.inlay_hint.refresh_support:
            self.workspace_inlay_hint_refresh(None)

    def publish(self, uri: str, force: bool = False) -> None:
        doc = self.documents.get(uri)
        if doc is None:
            found: list[types.Diagnostic] = []
        else:
            found = self.diagnostics.collect(doc, self.config.settings_for(doc.root))
        # While typing, publish only when there is something to say or to take back.
        if not force and not found and not self._published.get(uri):
            return
        self._published[uri] = len(found)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=found)
        )

    def after_run(self, uri: str) -> None:
        self.refresh_lenses()
        self.refresh_hints()
        self.publish(uri, force=True)
        for other in list(self.documents):  # an open library file the run executed
            if other != uri:
                self.publish(other)

    def report_settings_problems(self) -> None:
        """Says once per distinct problem that a settings source is malformed (the features
        meanwhile run on the defaults)."""
        for root in self.roots():
            self.config.settings_for(root)
        for root, problem in self.config.problem_items():
            if self._told.get(root) != problem:
                self._told[root] = problem
                message = f"trnlens settings: {problem}; using the defaults"
                self.show(message, types.MessageType.Warning)

    def refresh_all(self) -> None:
        self.report_settings_problems()
        self.refresh_lenses()
        self.refresh_hints()
        for uri in list(self.documents):
            self.publish(uri)

    async def fetch_configuration(self) -> None:
        workspace = self.client_capabilities.workspace
        if not (workspace and workspace.configuration):
            return
        try:
            values = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="trnlens")])
            )
        except Exception as exc:
            log.warning("workspace/configuration failed: %s", exc)
            return
        self.config.set_client_configuration(values[0] if values else None)


def _guard(default: Any) -> Callable[[F], F]:
    """Logs a feature's failure and answers ``default``: the other features keep working."""

    def wrap(handler: F) -> F:
        if inspect.iscoroutinefunction(handler):

            @functools.wraps(handler)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await handler(*args, **kwargs)
                except Exception:
                    log.exception("%s failed", handler.__name__)
                    return default

            return guarded_async  # type: ignore[return-value]

        @functools.wraps(handler)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return handler(*args, **kwargs)
            except Exception:
                log.exception("%s failed", handler.__name__)
                return default

        return guarded  # type: ignore[return-value]

    return wrap


def create_server() -> TrnlensServer:
    server = TrnlensServer()
    watching = install_watching(server)  # disk, history, regressions

    @server.feature(types.INITIALIZE)
    def initialize(ls: TrnlensServer, params: types.InitializeParams) -> None:
        ls.config.set_initialization_options(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: TrnlensServer, params: types.InitializedParams) -> None:
        await ls.fetch_configuration()
        ls.refresh_all()
        watching.start(asyncio.get_running_loop())

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: TrnlensServer, params: types.DidChangeConfigurationParams
    ) -> None:
        settings = params.settings
        if isinstance(settings, dict) and settings.get("trnlens") is not None:
            ls.config.set_client_configuration(settings["trnlens"])
        else:  # a "pull" client: the notification only says that something changed
            await ls.fetch_configuration()
        ls.refresh_all()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    @_guard(None)
    def did_open(ls: TrnlensServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = ls.open_document(params.text_document.uri, params.text_document.text)
        if doc is not None:
            ls.report_settings_problems()
            watching.watch(doc.root)
            ls.publish(doc.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @_guard(None)
    def did_change(ls: TrnlensServer, params: types.DidChangeTextDocumentParams) -> None:
        doc = ls.documents.get(params.text_document.uri)
        if doc is None:
            return
        text = ls.workspace.get_text_document(doc.uri).source
        doc.update(text, list(params.content_changes))
        if doc.restore_matching():  # an Undo: the run that measured this text is shown again
            ls.refresh_lenses()
            ls.refresh_hints()
            ls.publish(doc.uri, force=True)
        else:
            ls.publish(doc.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @_guard(None)
    def did_close(ls: TrnlensServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        if ls.documents.pop(uri, None) is not None:
            ls.publish(uri, force=True)
            ls._published.pop(uri, None)
            ls.analysis.forget(uri)
            ls.lenses.forget(uri)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    @_guard([])
    def code_lens(ls: TrnlensServer, params: types.CodeLensParams) -> list[Any]:
        doc = ls.documents.get(params.text_document.uri)
        if doc is None:
            return []
        settings = ls.config.settings_for(doc.root)
        # Compare lenses first: an editor shows them before ▶ Profile on the same line.
        compare = _guard([])(ls.analysis.lenses)(doc, settings.target)
        pending = ls.runs.pending(doc.uri)
        # JSON dicts from the cache (see lsp/wire.py): unchanged lenses are not rebuilt.
        ranks = target_nproc(settings.targets.get(settings.target), strict=False)
        profile = ls.lenses.lenses(doc, settings.target, settings.lens_placement, pending, ranks)
        # The report lens first: clients that key lenses by function keep the Profile lens.
        return _guard([])(run_report.code_lenses)(doc) + compare + profile

    @server.feature(types.CODE_LENS_RESOLVE)
    @_guard(None)
    def code_lens_resolve(ls: TrnlensServer, lens: types.CodeLens) -> types.CodeLens:
        data = lens.data if isinstance(lens.data, dict) else {}
        if data.get("kind") != lenses.KIND:
            return lens
        doc = ls.documents.get(str(data.get("uri")))
        return lenses.resolve(doc, lens, ls.runs.job_state, watching.lens_label)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=actions.KINDS, resolve_provider=False),
    )
    @_guard([])
    def code_action(ls: TrnlensServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        doc = ls.documents.get(params.text_document.uri)
        if doc is None:
            return []
        return (
            missing_inputs.code_actions(doc, params)
            + actions.code_actions(ls, doc, params)
            + run_findings.code_actions(doc, params)
            + library.code_actions(doc, params)
        )

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    @_guard([])
    def inlay_hint(ls: TrnlensServer, params: types.InlayHintParams) -> list[types.InlayHint]:
        doc = ls.documents.get(params.text_document.uri)
        if doc is None or not ls.config.settings_for(doc.root).hints_enabled:
            return []
        found = hints.inlay_hints(doc, params.range) + rank_hints.inlay_hints(doc, params.range)
        found += library.inlay_hints(doc, ls.documents.values(), params.range)
        return sorted(found, key=lambda h: h.position.line)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @_guard(None)
    async def hover(ls: TrnlensServer, params: types.HoverParams) -> types.Hover | None:
        doc = ls.documents.get(params.text_document.uri)
        if doc is None:
            return None
        store = ls.store(doc.root)
        artifacts = store.artifacts if store else None
        placement = hovers.placement_at(doc, params.position) if artifacts else None
        if placement is not None:  # its run folder's walk, once, off the loop
            run_dir = artifacts / placement.result.run_id
            await asyncio.to_thread(hovers.neuron_lines, run_dir)
            if ls.documents.get(doc.uri) is not doc:
                return None  # closed meanwhile
        compared = {
            q: c.answer for (uri, q), c in ls.analysis.comparisons.items() if uri == doc.uri
        }
        general = ls.client_capabilities.general
        pad = bool(general and general.markdown)  # a declared Markdown parser renders &nbsp;
        return hovers.hover(doc, params.position, artifacts, compared, pad)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    async def progress_cancel(ls: TrnlensServer, params: types.WorkDoneProgressCancelParams):
        await ls.runs.cancel_token(str(params.token))

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: TrnlensServer, params: None) -> None:
        watching.stop()
        tunnels = getattr(ls, "explorer_tunnels", None)  # before the masters they may ride on
        if tunnels is not None:
            await asyncio.to_thread(tunnels.close_all)
        await ls.runs.close()
        for store in ls._stores.values():
            store.close()
        ls._stores.clear()

    for name, handler in commands.HANDLERS.items():
        server.command(name)(_command(handler))
    return server


def _command(handler: Callable[..., Any]) -> Callable[..., Any]:
    # pygls passes the server as `ls` and the raw JSON arguments through `*args`.
    async def run(ls: TrnlensServer, *args: Any) -> Any:
        return await handler(ls, *args)

    run.__name__ = handler.__name__
    return run
