"""A real LSP client (pytest-lsp) driving ``trnlens serve`` over stdio, as an editor would.

Every server starts under ``guard.py``, which kills it (exit 97) if it ever imports torch, so each
e2e test also proves the server stays torch-free.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient
from pytest_lsp.client import make_test_lsp_client

from .guard import TORCH_LOADED

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
SERVER = [sys.executable, str(HERE / "guard.py"), "serve"]
# Small enough for a 2-core machine: each run is then a few seconds plus the agent's torch import.
FAST = {"warmup": 1, "steps": 2, "repeats": 3}
RUN_TIMEOUT_S = 180
# How long a barrier may take before the test calls it a hang (generous for a loaded machine:
# the barriers wait for an event, so the bound is never part of what a test asserts).
BARRIER_TIMEOUT_S = 60
# A text with one finding (TRN001 on the naive RMSNorm) for the barriers' documents.
BARRIER_TEXT = (FIXTURES / "model.py").read_text("utf-8")
_barriers = itertools.count()


def workspace(tmp_path: Path, pyproject: str = "") -> Path:
    """A project root (pyproject.toml marks it) holding a copy of the model fixture."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text(f'[project]\nname = "demo"\n{pyproject}', "utf-8")
    shutil.copy(FIXTURES / "model.py", root / "model.py")
    return root


def capabilities() -> types.ClientCapabilities:
    return types.ClientCapabilities(
        window=types.WindowClientCapabilities(
            work_done_progress=True,
            show_message=types.ShowMessageRequestClientCapabilities(),
            show_document=types.ShowDocumentClientCapabilities(support=True),
        ),
        workspace=types.WorkspaceClientCapabilities(
            configuration=True,
            code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True),
            inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True),
        ),
        # As VS Code declares it: the server then asks for notebooks' cells (lsp/notebooks.py).
        notebook_document=types.NotebookDocumentClientCapabilities(
            synchronization=types.NotebookDocumentSyncClientCapabilities()
        ),
        text_document=types.TextDocumentClientCapabilities(
            hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(),
        ),
    )


class Editor:
    """The test's editor: a pytest-lsp client plus what an editor tracks (versions, refreshes)."""

    def __init__(self, client: LanguageClient, root: Path):
        self.client = client
        self.root = root
        self.versions: dict[str, int] = {}
        self.refreshes = {"codeLens": 0, "inlayHint": 0}
        self.pick: str | None = None  # what the user picks when the server asks
        self.questions: list[types.ShowMessageRequestParams] = []
        self._analysis_barrier: str | None = None
        self.initialized: types.InitializeResult | None = None  # the server's answer

    def uri(self, name: str = "model.py") -> str:
        return (self.root / name).as_uri()

    def open(self, name: str = "model.py", text: str | None = None) -> str:
        uri = self.uri(name)
        if text is None:
            text = (self.root / name).read_text("utf-8")
        self.versions[uri] = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
        )
        return uri

    def edit(self, uri: str, line: int, character: int, text: str, end: tuple | None = None):
        """Replaces [(line, character), end) by ``text`` (an insertion without ``end``)."""
        end_line, end_char = end or (line, character)
        self.versions[uri] += 1
        change = types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(line, character), types.Position(end_line, end_char)),
            text=text,
        )
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=self.versions[uri], uri=uri), [change]
            )
        )

    async def lenses(self, uri: str) -> dict[str, types.CodeLens]:
        """Lenses by qualname (each lens carries its function in its command's argument).

        As an editor does for the lenses on screen, a lens without a command (one with figures)
        is completed with ``codeLens/resolve``."""
        found = await self.client.text_document_code_lens_async(
            types.CodeLensParams(types.TextDocumentIdentifier(uri))
        )
        resolved = [
            lens if lens.command else await self.client.code_lens_resolve_async(lens)
            for lens in found or []
        ]
        return {lens.command.arguments[0]["qualname"]: lens for lens in resolved}

    async def hints(self, uri: str, lines: int = 200) -> list[types.InlayHint]:
        found = await self.client.text_document_inlay_hint_async(
            types.InlayHintParams(
                types.TextDocumentIdentifier(uri),
                types.Range(types.Position(0, 0), types.Position(lines, 0)),
            )
        )
        return found or []

    async def hover(self, uri: str, line: int, character: int = 8) -> types.Hover | None:
        return await self.client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, character))
        )

    async def command(self, name: str, *arguments: Any) -> Any:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=name, arguments=list(arguments))
        )

    async def click(self, lens: types.CodeLens) -> dict:
        """Does what an editor does when the user clicks a lens: runs its command as carried."""
        return await self.command(lens.command.command, *(lens.command.arguments or []))

    def progress(self, token: str) -> list:
        return list(self.client.progress_reports.get(token, []))

    async def wait_for_end(self, token: str, timeout: float = RUN_TIMEOUT_S):
        """The progress's end report, once the run is over."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reports = self.progress(token)
            if reports and isinstance(reports[-1], types.WorkDoneProgressEnd):
                return reports[-1]
            await asyncio.sleep(0.05)
        raise TimeoutError(f"progress {token} did not end: {self.progress(token)}")

    async def wait_for(self, predicate, timeout: float = 10, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            await asyncio.sleep(0.05)
        raise TimeoutError(f"timed out waiting for {what}")

    async def profile(self, uri: str, qualname: str) -> tuple[dict, types.WorkDoneProgressEnd]:
        """Clicks the function's lens and waits for its run to end."""
        lens = (await self.lenses(uri))[qualname]
        answer = await self.click(lens)
        return answer, await self.wait_for_end(answer["token"])

    def diagnostics(self, uri: str, code: str | None = None) -> list[types.Diagnostic]:
        found = self.client.diagnostics.get(uri, [])
        return [d for d in found if code is None or d.code == code]

    async def analysis_settled(self) -> None:
        """Returns once every analysis the server had scheduled (the debounce after an edit) has
        run and published, with no fixed wait: a barrier document of our own is edited (a line
        inserted above its finding) and its finding is awaited on the new line. The server only
        publishes the moved finding from its debounced analysis, scheduled after every earlier
        edit's (the same delay, later), and the client reads the server's messages in order."""
        uri = self._analysis_barrier
        if uri is None:
            uri = self._analysis_barrier = self.uri(f"zz_analysis_barrier_{next(_barriers)}.py")
            self.versions[uri] = 1
            self.client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    types.TextDocumentItem(uri, "python", 1, BARRIER_TEXT)
                )
            )
            await self.wait_for(lambda: self.diagnostics(uri), timeout=BARRIER_TIMEOUT_S,
                                what="the analysis barrier's finding")  # fmt: skip
        line = self.diagnostics(uri)[0].range.start.line
        # A round trip first: the server has handled every earlier edit before this one.
        await self.client.text_document_code_lens_async(
            types.CodeLensParams(types.TextDocumentIdentifier(uri))
        )
        self.edit(uri, 0, 0, "\n")
        await self.wait_for(
            lambda: any(d.range.start.line == line + 1 for d in self.diagnostics(uri)),
            timeout=BARRIER_TIMEOUT_S,
            what="the analysis barrier's finding on its new line",
        )

    async def watcher_settled(self) -> None:
        """Returns once the server's watcher has handled every file event made before the call,
        with no fixed wait: a closed file with a finding is written, then deleted once its
        diagnostics are in, and the deletion's cleared diagnostics are awaited. The watcher
        reports events in order, one batch after another, and applies each batch on the server's
        loop (its files' diagnostics, then deletions and new runs) before the next."""
        path = self.root / f"zz_watch_barrier_{next(_barriers)}.py"
        uri = path.as_uri()
        path.write_text(BARRIER_TEXT, "utf-8")
        await self.wait_for(lambda: self.diagnostics(uri), timeout=BARRIER_TIMEOUT_S,
                            what="the watch barrier's diagnostics")  # fmt: skip
        path.unlink()
        await self.wait_for(lambda: not self.diagnostics(uri), timeout=BARRIER_TIMEOUT_S,
                            what="the watch barrier's diagnostics cleared")  # fmt: skip


@contextlib.asynccontextmanager
async def editor(
    root: Path, options: dict | None = None, cpu_stall_s: float | None = None
) -> AsyncIterator[Editor]:
    """``cpu_stall_s``: a test's own bar for a callback's CPU time on the loop (loop_guard.py's
    default otherwise); a test that raises it says why."""
    client = make_test_lsp_client()
    session = Editor(client, root)

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def _lens_refresh(params: None) -> None:
        session.refreshes["codeLens"] += 1

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def _hint_refresh(params: None) -> None:
        session.refreshes["inlayHint"] += 1

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def _question(params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        session.questions.append(params)
        return types.MessageActionItem(title=session.pick) if session.pick else None

    # The loop guard's findings (tests/lsp/loop_guard.py): a blocking call or a CPU stall on the
    # server's event loop fails the test.
    handle, stalls = tempfile.mkstemp(prefix="trnlens-loop-guard-", suffix=".log")
    os.close(handle)
    env = {**os.environ, "TRNLENS_LOOP_GUARD": stalls}
    if cpu_stall_s is not None:
        env["TRNLENS_LOOP_GUARD_CPU_S"] = str(cpu_stall_s)
    try:
        await client.start_io(*SERVER, cwd=str(root), env=env)
    except BaseException:
        os.unlink(stalls)
        raise
    try:
        session.initialized = await client.initialize_session(
            types.InitializeParams(
                capabilities=capabilities(),
                root_uri=root.as_uri(),
                workspace_folders=[types.WorkspaceFolder(root.as_uri(), root.name)],
                initialization_options=options if options is not None else dict(FAST),
            )
        )
        yield session
    finally:
        try:
            await client.shutdown_session()
            await client.stop()
        finally:
            found = Path(stalls).read_text("utf-8")
            os.unlink(stalls)
        server = client._server
        assert server is None or server.returncode != TORCH_LOADED, "the server imported torch"
        assert not found, f"the server's event loop was blocked:\n{found}"
