"""Server commands (``workspace/executeCommand``), IDs prefixed ``trnlens.server.``.

Each is a module-level function of the services and its typed argument (``command_args``: one
JSON object, structured by ``wire.structure_argument``; a lens carries it, so any LSP editor can
click it) and returns a JSON object. A refusal raises :class:`CommandError`, which the client
receives as the command's error response, with a message saying what to do. That response is the
only place a refusal is told: every LSP client shows a failed command's message (VS Code once, as
one toast), so a ``window/showMessage`` beside it would say it twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from trnlens.lsp import open_explorer as explorer
from trnlens.lsp import report as run_report
from trnlens.lsp.analysis import RunFailed
from trnlens.lsp.command_args import (
    Argument,
    CancelArgument,
    ClearArgument,
    ExplorerArgument,
    FunctionArgument,
    HistoryArgument,
    MeasureFixArgument,
    ReportArgument,
    SelectTargetArgument,
)
from trnlens.lsp.command_ids import (
    CANCEL,
    CLEAR_RESULTS,
    COMPARE,
    HISTORY,
    MEASURE_FIX,
    OPEN_EXPLORER,
    PROFILE,
    REPORT,
    SELECT_TARGET,
)
from trnlens.lsp.errors import CommandError
from trnlens.lsp.runs import RequestRefused, target_nproc
from trnlens.lsp.services import Services
from trnlens.settings import TargetSettings

Answer = dict[str, Any]


async def profile(app: Services, arg: FunctionArgument) -> Answer:
    """-> {token, state, position, target, alreadyPending}."""
    try:
        return await app.runs.profile(arg.uri, arg.qualname, arg.target)
    except RequestRefused as exc:
        raise CommandError(str(exc)) from None


async def compare(app: Services, arg: FunctionArgument) -> Answer:
    """-> the comparison of the original, each analysis fix and the compiled original (answered
    once the run is over; see ``analysis.summarize``); without a fix, as written vs compiled."""
    return await _compare(app, arg.uri, arg.qualname, arg.target, None, compiled_only=True)


async def measure_fix(app: Services, arg: MeasureFixArgument) -> Answer:
    """-> like compare, with only the fix of ``code`` (default: every fix in the function)."""
    return await _compare(app, arg.uri, arg.qualname, arg.target, arg.code)


async def _compare(
    app: Services,
    uri: str,
    qualname: str,
    target: str | None,
    code: str | None,
    compiled_only: bool = False,
) -> Answer:
    try:
        return await app.analysis.compare(uri, qualname, target, code, compiled_only)
    except RunFailed as exc:  # it ran and failed: the answer says so (runs._fail did not)
        raise CommandError(str(exc), exc.severity) from None
    except RequestRefused as exc:
        raise CommandError(str(exc)) from None


async def cancel(app: Services, arg: CancelArgument) -> Answer:
    """-> {cancelled}: that function's job, a file's jobs, or every job."""
    return {"cancelled": await app.runs.cancel(arg.uri, arg.qualname)}


async def select_target(app: Services, arg: SelectTargetArgument) -> Answer:
    """-> {target, targets}. Without a name, asks the user when the client can
    (``window/showMessageRequest``, buttons); ``ask: false`` only lists, for a client that asks
    in its own way (VS Code's extension: a Quick Pick, then this command with the name)."""
    ctx = app.ctx
    settings = ctx.settings_for(ctx.default_root())
    names = sorted(settings.targets)
    chosen = arg.target
    if chosen is None and arg.ask and ctx.client.can_ask():
        # A target that runs several ranks says so: "two (2 ranks)".
        titles = {_target_title(name, settings.targets[name]): name for name in names}
        message = f"trnlens: profile on which target? (now: {settings.target})"
        answer = await ctx.client.ask(message, list(titles))
        chosen = titles.get(answer, answer) if answer is not None else None
    if chosen is not None:
        try:
            settings.target_named(chosen)
        except KeyError as exc:
            raise CommandError(str(exc.args[0])) from None
        ctx.config.session_target = chosen
        ctx.refresh_lenses()
    return {"target": ctx.settings_for(ctx.default_root()).target, "targets": names}


def _target_title(name: str, target: TargetSettings) -> str:
    ranks = target_nproc(target, strict=False)
    return f"{name} ({ranks} ranks)" if ranks > 1 else name


async def clear_results(app: Services, arg: ClearArgument) -> Answer:
    """-> {cleared}: forgets one file's runs, or every run of the open projects."""
    ctx, cleared = app.ctx, 0
    if arg.uri is not None:
        uri = arg.uri  # a notebook cell's uri arrives as its notebook's (server._command)
        root, relpath = ctx.root_and_relpath(ctx.path_of(uri))
        store = ctx.store(root)
        if store is not None:
            cleared = store.clear(relpath)
        doc = ctx.documents.get(uri)
        if doc is not None:
            doc.clear_runs()
        app.analysis.forget_comparisons(uri)
        uris = [uri]
    else:
        for root in ctx.roots():
            store = ctx.store(root)
            if store is not None:
                cleared += store.clear()
        for doc in ctx.documents.values():
            doc.clear_runs()
        app.analysis.forget_comparisons()
        uris = list(ctx.documents)
    for each in uris:
        ctx.after_run(each)
    return {"cleared": cleared}


async def open_explorer(app: Services, arg: ExplorerArgument) -> Answer:
    """-> {url, apiUrl, displayNames, tunnelReused, message} (see ``lsp/open_explorer.py``)."""
    return await explorer.open_explorer(app.ctx, app.runs, app.tunnels, arg)


async def report(app: Services, arg: ReportArgument) -> Answer:
    """-> {path, uri, root, runIds, reused, title}: the run report (see ``lsp/report.py``)."""
    try:
        return await run_report.report(app.ctx, arg)
    except run_report.ReportRefused as exc:
        raise CommandError(str(exc)) from None


async def history(app: Services, arg: HistoryArgument) -> Answer:
    """-> {identity, aliases, runs, stale, watching} (see ``Watching.history``)."""
    return await app.watching.history(arg.uri, arg.qualname)


@dataclass(frozen=True)
class Command:
    """A command's handler and the type its one argument is structured to."""

    handler: Callable[[Services, Any], Awaitable[Answer]]
    argument: type[Argument]


HANDLERS: dict[str, Command] = {
    PROFILE: Command(profile, FunctionArgument),
    CANCEL: Command(cancel, CancelArgument),
    SELECT_TARGET: Command(select_target, SelectTargetArgument),
    CLEAR_RESULTS: Command(clear_results, ClearArgument),
    COMPARE: Command(compare, FunctionArgument),
    MEASURE_FIX: Command(measure_fix, MeasureFixArgument),
    OPEN_EXPLORER: Command(open_explorer, ExplorerArgument),
    REPORT: Command(report, ReportArgument),
    HISTORY: Command(history, HistoryArgument),
}
