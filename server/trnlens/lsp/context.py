"""What the editor features share: the open documents, the stores, the settings, and the client.

Features take a :class:`Context` (or only the parts they use), never the pygls server: the server
(``server.py``) only wires LSP methods to handlers, and the client side of the connection is
reached through the small :class:`Client` protocol (``client.py`` implements it over pygls; unit
tests pass a fake). Nothing here imports a feature module, so no feature can import its way back
to the server.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import attrs
from lsprotocol import types
from pygls.uris import to_fs_path

from trnlens import project
from trnlens.agent.notebook.cells import NotebookError, join_notebook
from trnlens.lsp import readonly
from trnlens.lsp.config import Config
from trnlens.lsp.diagnostics import DiagnosticsHub
from trnlens.lsp.documents import Analysis, ProfiledDocument, analyse, parse_or_none
from trnlens.lsp.errors import CommandError
from trnlens.lsp.progress import RunProgress
from trnlens.lsp.stored import latest_profile
from trnlens.results import Result, SchemaMismatch
from trnlens.settings import Settings
from trnlens.store import Store, StoreError

log = logging.getLogger(__name__)


class Client(Protocol):
    """The editor at the other end, as far as the features talk to it."""

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None: ...

    def show_document(self, uri: str) -> None:
        """Asks the client to open ``uri`` externally (a browser), when it can."""

    def publish_diagnostics(self, uri: str, diagnostics: list[types.Diagnostic]) -> None: ...

    def notify(self, method: str, params: object) -> None: ...

    def refresh_lenses(self) -> None: ...

    def refresh_hints(self) -> None: ...

    def progress(self, token: str, title: str, kind: str, qualname: str) -> RunProgress: ...

    def can_ask(self) -> bool:
        """Whether the client shows message requests with buttons."""

    async def ask(self, message: str, titles: list[str]) -> str | None:
        """The title of the button the user chose (None: dismissed)."""

    async def fetch_configuration(self) -> list[object] | None:
        """The answer to ``workspace/configuration`` for the ``trnlens`` section; None when the
        client cannot be asked or did not answer."""

    def markdown(self) -> bool:
        """Whether the client declared a Markdown parser (it renders ``&nbsp;``)."""

    def workspace_root(self) -> Path | None: ...

    def document_text(self, uri: str) -> str:
        """The open document's text, with every change the client sent applied."""

    def workspace_folders(self) -> list[Path]: ...

    def notebook_cells(self, uri: str) -> list[tuple[str, bool, str, str]] | None:
        """An open notebook's cells as ``(uri, is_code, language, text)``, in order."""


class Context:
    """The state every feature reads: documents by uri, a store per project, settings, the
    client; and the few ways of telling the client what changed."""

    def __init__(self, client: Client, config: Config | None = None) -> None:
        self.client = client
        self.config = config or Config()
        self.documents: dict[str, ProfiledDocument] = {}
        self.diagnostics = DiagnosticsHub()
        self._stores: dict[Path, Store] = {}
        self._generations = itertools.count(1)
        self._published: dict[str, int] = {}
        self._told: dict[Path, str] = {}  # settings problems already shown, by root
        self._opening: dict[str, asyncio.Event] = {}  # documents being parsed off the loop
        self.cells: dict[str, str] = {}  # an open notebook's cell uri -> the notebook's uri
        # the documents whose edited text is parsed off the loop now (a reopened one is another)
        self._reparsing: dict[str, ProfiledDocument] = {}
        self._deferred: dict[str, bool] = {}  # publishes asked for meanwhile (and their force)
        self._tasks: set[asyncio.Task] = set()
        # closed project files' analyses by path: (mtime_ns, size, analysis or None)
        self._closed: dict[Path, tuple[int, int, Analysis | None]] = {}

    # -- paths, projects, stores
    def path_of(self, uri: str) -> Path:
        path = to_fs_path(uri)
        if path is None:
            raise CommandError(f"not a file: {uri}")
        return Path(path)

    def root_and_relpath(self, path: Path) -> tuple[Path, str]:
        root = project.find_root(path)
        try:
            return root, path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return root, path.as_posix()

    def roots(self) -> set[Path]:
        found = {doc.root for doc in self.documents.values()}
        found.update(self.client.workspace_folders())
        return found

    def default_root(self) -> Path:
        root = self.client.workspace_root()
        if root is not None:
            return root
        return next(iter(self.roots()), Path.cwd())

    def settings_for(self, root: Path) -> Settings:
        return self.config.settings_for(root)

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

    def run_store(self, root: Path) -> Store:
        """The project's store for a run to go in, created by the first one."""
        store = self.store(root, create=True)
        assert store is not None  # create=True makes one or raises StoreError
        return store

    def close_stores(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()

    def unsaved_files(self, root: Path) -> dict[str, str]:
        """Open documents of this project whose text differs from the file on disk."""
        files = {}
        for doc in self.documents.values():
            if doc.root != root:
                continue
            try:
                on_disk = doc.path.read_text(encoding="utf-8")
                if doc.notebook_json is not None:  # a notebook: its cells, joined
                    on_disk = join_notebook(on_disk).text
            except (OSError, UnicodeDecodeError, NotebookError):
                on_disk = None
            if on_disk != doc.text:
                files[str(doc.path)] = doc.notebook_json or doc.text
        return files

    # -- documents
    def open_document(self, uri: str, text: str) -> ProfiledDocument | None:
        """Opens the document and places its stored runs, all at once (parsing it here)."""
        doc = self.add_document(uri, text)
        if doc is not None:
            self.load_stored(doc)
        return doc

    def add_document(self, uri: str, text: str, notebook: bool = False) -> ProfiledDocument | None:
        """The document, open from now on (edits apply to it) but not parsed yet; None for a
        file that is no Python source (``notebook``: a notebook's joined cells)."""
        path = to_fs_path(uri)
        if path is None or not path.endswith(".ipynb" if notebook else (".py", ".pyi")):
            return None
        root = project.find_root(path)
        doc = ProfiledDocument(uri, Path(path), root, text, next(self._generations))
        doc.read_only = readonly.outside_project(
            doc.path, doc.root, self.client.workspace_folders()
        )
        doc.project_files = lambda relpath: self.project_analysis(root, relpath)
        self.documents[uri] = doc
        return doc

    def project_analysis(self, root: Path, relpath: str) -> Analysis | None:
        """The analysis of a project file's text now: its open buffer, else the file on disk
        (read again only when its size or mtime changed); None when it cannot be read or
        parsed. What a run's executed fingerprint is checked against (documents.py)."""
        for doc in list(self.documents.values()):  # a copy: also called from a worker thread
            if doc.root == root and doc.relpath == relpath:
                return doc.analysis()
        path = root / relpath
        try:
            stat = path.stat()
        except OSError:
            self._closed.pop(path, None)
            return None
        cached = self._closed.get(path)
        if cached is not None and cached[:2] == (stat.st_mtime_ns, stat.st_size):
            return cached[2]
        try:  # a source file, read once per change: small next to a parse
            found: Analysis | None = analyse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            found = None
        self._closed[path] = (stat.st_mtime_ns, stat.st_size, found)
        return found

    def opening(self, uri: str) -> asyncio.Event:
        """Marks the document as being prepared off the loop: requests wait for :meth:`opened`
        (their answers need its parse) instead of parsing it on the loop themselves."""
        ready = self._opening[uri] = asyncio.Event()
        return ready

    def opened(self, uri: str, ready: asyncio.Event) -> None:
        ready.set()
        if self._opening.get(uri) is ready:
            del self._opening[uri]
            if uri in self._deferred and uri in self.documents:
                self.publish(uri, force=self._deferred.pop(uri))
        if uri not in self.documents:
            self._deferred.pop(uri, None)

    async def document(self, uri: str) -> ProfiledDocument | None:
        """The open document, once it is ready to answer requests (see :meth:`opening`): its
        text now is parsed (off the loop, on open and after each edit)."""
        while (ready := self._opening.get(uri)) is not None and not ready.is_set():
            await ready.wait()
        return self.documents.get(uri)

    async def reparsed(self, doc: ProfiledDocument, ready: asyncio.Event) -> None:
        """For the document's open (``ready``, its event): when an edit came during the open,
        waits for the edit's re-parse (see :meth:`reparse`), so that nothing parses it on the
        loop."""
        while not doc.parsed():
            other = self._opening.get(doc.uri)
            if other is None or other is ready or other.is_set():
                return
            await other.wait()

    def preparing(self, uri: str) -> bool:
        """Whether the document's text is being parsed off the loop (it publishes once done)."""
        ready = self._opening.get(uri)
        return ready is not None and not ready.is_set()

    def reparse(self, doc: ProfiledDocument, then: Callable[[ProfiledDocument], None]) -> None:
        """After an edit: the new text is parsed in a worker thread (a 50,000-line file's
        re-parse is 30-170 ms of CPU, too long for the loop); requests on the document wait
        for it, then ``then(doc)`` runs on the loop. Edits that come meanwhile are parsed by
        the same task, one text after another, the last one last."""
        if self._reparsing.get(doc.uri) is doc:
            return  # the running task parses the newest text before it ends
        self._reparsing[doc.uri] = doc
        ready = self.opening(doc.uri)
        task = asyncio.get_running_loop().create_task(self._reparse(doc, ready, then))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reparse(
        self, doc: ProfiledDocument, ready: asyncio.Event, then: Callable[[ProfiledDocument], None]
    ) -> None:
        try:
            while self.documents.get(doc.uri) is doc and not doc.parsed():
                text = doc.text
                doc.adopt_parse(text, await asyncio.to_thread(parse_or_none, text))
            if self.documents.get(doc.uri) is doc:
                then(doc)
        except Exception:
            log.exception("re-parsing %s failed", doc.uri)
        finally:
            if self._reparsing.get(doc.uri) is doc:
                del self._reparsing[doc.uri]
            self.opened(doc.uri, ready)

    def close_document(self, uri: str) -> bool:
        """Forgets the document and takes back its diagnostics; False when it was not open."""
        if self.documents.pop(uri, None) is None:
            return False
        self.publish(uri, force=True)
        self._published.pop(uri, None)
        return True

    def load_stored(self, doc: ProfiledDocument) -> None:
        """Reopening the editor shows the last run of each function, from the store."""
        try:
            store = self.store(doc.root)
        except StoreError as exc:  # the document still opens, analysed, without stored runs
            self.show(f"trnlens: {exc}", types.MessageType.Warning)
            return
        analysis = doc.analysis()
        if store is None or analysis is None:
            return
        stored = store.qualnames(doc.relpath)  # a 50,000-line file: not 10,000 queries
        for qualname in (q for q in analysis.symbols if q in stored):
            found = latest_profile(store, doc.relpath, qualname)  # not a fixed/compiled variant
            if found is None:
                continue
            try:
                doc.place(Result.parse(found))
            except SchemaMismatch as exc:
                log.warning("ignoring stored run of %s: %s", qualname, exc)

    # -- telling the client
    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.client.show(message, kind)

    def refresh_lenses(self) -> None:
        self.client.refresh_lenses()

    def refresh_hints(self) -> None:
        self.client.refresh_hints()

    def publish(self, uri: str, force: bool = False) -> None:
        doc = self.documents.get(uri)
        if doc is not None and self.preparing(uri):
            # its parse is being made off the loop: published once it is in (see opened)
            self._deferred[uri] = self._deferred.get(uri, False) or force
            return
        if doc is None:
            found: list[types.Diagnostic] = []
        else:
            found = self.diagnostics.collect(doc, self.config.settings_for(doc.root))
            if doc.cells is not None:
                self.publish_cells(doc, found, force)
                return
        # While typing, publish only when there is something to say or to take back.
        if not force and not found and not self._published.get(uri):
            return
        self._published[uri] = len(found)
        self.client.publish_diagnostics(uri, found)

    def publish_cells(
        self, doc: ProfiledDocument, found: list[types.Diagnostic], force: bool
    ) -> None:
        """A notebook's diagnostics, each on its cell's uri with the cell's lines."""
        assert doc.cells is not None
        by_cell: dict[str, list[types.Diagnostic]] = {c.id: [] for c in doc.cells.cells}
        for diagnostic in found:
            located = doc.cells.locate(diagnostic.range.start.line + 1)
            if located is None:
                continue
            cell, _ = located
            by_cell[cell.id].append(_in_cell(diagnostic, cell.start - 1))
        for uri, diagnostics in by_cell.items():
            if not force and not diagnostics and not self._published.get(uri):
                continue
            self._published[uri] = len(diagnostics)
            self.client.publish_diagnostics(uri, diagnostics)

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
        values = await self.client.fetch_configuration()
        if values is not None:
            self.config.set_client_configuration(values[0] if values else None)


def _in_cell(diagnostic: types.Diagnostic, shift: int) -> types.Diagnostic:
    start, end = diagnostic.range.start, diagnostic.range.end
    moved = types.Range(
        types.Position(start.line - shift, start.character),
        types.Position(end.line - shift, end.character),
    )
    return attrs.evolve(diagnostic, range=moved)
