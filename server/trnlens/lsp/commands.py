"""Server commands (``workspace/executeCommand``), IDs prefixed ``trnlens.server.``.

Each takes one JSON object argument (a lens carries it, so any LSP editor can click it) and
returns a JSON object. A refusal raises :class:`CommandError`, which the client receives as the
command's error response, with a message saying what to do. That response is the only place a
refusal is told: every LSP client shows a failed command's message (VS Code once, as one toast),
so a ``window/showMessage`` beside it would say it twice.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from trnlens.lsp.analysis import RunFailed
from trnlens.lsp.command_ids import (
    CANCEL,
    CLEAR_RESULTS,
    COMPARE,
    MEASURE_FIX,
    OPEN_EXPLORER,
    PROFILE,
    REPORT,
    SELECT_TARGET,
)  # fmt: skip
from trnlens.lsp.runs import RequestRefused, target_nproc

if TYPE_CHECKING:
    from trnlens.lsp.server import TrnlensServer


class CommandError(JsonRpcException):
    """A refused command. A JsonRpcException, so that pygls answers with this message as it is
    (any other exception's message starts with its class name, which no user should read).
    ``data.severity``: "warning" for what the user can fix (the default), "error" for a run that
    broke."""

    CODE = -32000  # JSON-RPC's implementation-defined server error range: "refused, see message"

    def __init__(self, message: str, severity: str = "warning"):
        super().__init__(message, self.CODE, {"severity": severity})


class _RefusalsAreNotCrashes(logging.Filter):
    """pygls logs every error response with a traceback; a refusal is an answer, not a crash:
    logged in one line at INFO instead (the client shows the message to the user)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, CommandError):
            record.exc_info = None
            record.msg, record.args = "refused: %s", (error.message,)
            record.levelno, record.levelname = logging.INFO, "INFO"
            # the record was made at ERROR: the configured level (`serve --log-level`) decides
            return logging.getLogger().isEnabledFor(logging.INFO)
        return True


logging.getLogger("pygls.protocol.json_rpc").addFilter(_RefusalsAreNotCrashes())


def _argument(args: tuple[Any, ...]) -> dict[str, Any]:
    if not args or args[0] is None:
        return {}
    if not isinstance(args[0], dict):
        raise CommandError("trnlens commands take one object argument, e.g. {uri, qualname}")
    return args[0]


async def profile(server: TrnlensServer, *args: Any) -> dict:
    """{uri, qualname, target?} -> {token, state, position, target, alreadyPending}."""
    arg = _argument(args)
    uri, qualname = arg.get("uri"), arg.get("qualname")
    if not isinstance(uri, str) or not isinstance(qualname, str):
        raise CommandError("trnlens.server.profile needs {uri, qualname}")
    try:
        return await server.runs.profile(uri, qualname, arg.get("target"))
    except RequestRefused as exc:
        raise CommandError(str(exc)) from None


async def compare(server: TrnlensServer, *args: Any) -> dict:
    """{uri, qualname, target?} -> the comparison of the original, each analysis fix and the
    compiled original (answered once the run is over; see ``analysis.summarize``)."""
    return await _compare(server, COMPARE, _argument(args), with_code=False)


async def measure_fix(server: TrnlensServer, *args: Any) -> dict:
    """{uri, qualname, code?} -> like compare, with only the fix of ``code`` (default: every
    fix in the function)."""
    return await _compare(server, MEASURE_FIX, _argument(args), with_code=True)


async def _compare(server: TrnlensServer, name: str, arg: dict, with_code: bool) -> dict:
    uri, qualname = arg.get("uri"), arg.get("qualname")
    if not isinstance(uri, str) or not isinstance(qualname, str):
        raise CommandError(f"{name} needs {{uri, qualname}}")
    code = arg.get("code") if with_code else None
    try:
        return await server.analysis.compare(uri, qualname, arg.get("target"), code)
    except RunFailed as exc:  # it ran and failed: the answer says so (runs._fail did not)
        raise CommandError(str(exc), exc.severity) from None
    except RequestRefused as exc:
        raise CommandError(str(exc)) from None


async def cancel(server: TrnlensServer, *args: Any) -> dict:
    """{uri?, qualname?} -> {cancelled}: that function's job, a file's jobs, or every job."""
    arg = _argument(args)
    count = await server.runs.cancel(arg.get("uri"), arg.get("qualname"))
    return {"cancelled": count}


async def select_target(server: TrnlensServer, *args: Any) -> dict:
    """{target?, ask?} -> {target, targets}. Without a name, asks the user when the client can
    (``window/showMessageRequest``, buttons); ``ask: false`` only lists, for a client that asks
    in its own way (VS Code's extension: a Quick Pick, then this command with the name)."""
    arg = _argument(args)
    settings = server.config.settings_for(server.default_root())
    names = sorted(settings.targets)
    chosen = arg.get("target")
    if chosen is None and arg.get("ask", True) is not False and _can_ask(server):
        # A target that runs several ranks says so: "two (2 ranks)".
        titles = {_target_title(name, settings.targets[name]): name for name in names}
        answer = await server.window_show_message_request_async(
            types.ShowMessageRequestParams(
                type=types.MessageType.Info,
                message=f"trnlens: profile on which target? (now: {settings.target})",
                actions=[types.MessageActionItem(title=title) for title in titles],
            )
        )
        chosen = titles.get(answer.title, answer.title) if answer else None
    if chosen is not None:
        try:
            settings.target_named(chosen)
        except KeyError as exc:
            raise CommandError(str(exc.args[0])) from None
        server.config.session_target = chosen
        server.refresh_lenses()
    return {"target": server.config.settings_for(server.default_root()).target, "targets": names}


def _target_title(name: str, target) -> str:
    ranks = target_nproc(target, strict=False)
    return f"{name} ({ranks} ranks)" if ranks > 1 else name


def _can_ask(server: TrnlensServer) -> bool:
    window = server.client_capabilities.window
    return bool(window and window.show_message)


async def clear_results(server: TrnlensServer, *args: Any) -> dict:
    """{uri?} -> {cleared}: forgets one file's runs, or every run of the open projects."""
    arg = _argument(args)
    uri = arg.get("uri")
    cleared = 0
    if uri is not None:
        doc = server.documents.get(uri)
        path = server.path_of(uri)
        root, relpath = server.root_and_relpath(path)
        store = server.store(root)
        if store is not None:
            cleared = store.clear(relpath)
        if doc is not None:
            doc.placements.clear()
            doc.superseded.clear()  # an Undo must not bring a cleared run back
        for key in [k for k in server.analysis.comparisons if k[0] == uri]:
            del server.analysis.comparisons[key]
        uris = [uri]
    else:
        for root in server.roots():
            store = server.store(root)
            if store is not None:
                cleared += store.clear()
        for doc in server.documents.values():
            doc.placements.clear()
            doc.superseded.clear()
        server.analysis.comparisons.clear()
        uris = list(server.documents)
    for each in uris:
        server.after_run(each)
    return {"cleared": cleared}


async def open_explorer(server: TrnlensServer, *args: Any) -> dict:
    """{uri?, qualname?, runId?, target?, uiPort?, apiPort?} -> {url, apiUrl, displayNames,
    tunnelReused, message}: the run's profile (runId, else the latest run of uri/qualname; none:
    the profile list) in Neuron Explorer on its target, through an SSH tunnel for a remote one."""
    from trnlens.explorer import launch
    from trnlens.explorer.tunnel import API_PORT, UI_PORT, ExplorerError, Pool, Ports
    from trnlens.lsp.runs import _build_target
    from trnlens.targets.ssh import TargetError

    arg = _argument(args)
    uri, qualname, run_id = arg.get("uri"), arg.get("qualname"), arg.get("runId")
    if uri is not None and not isinstance(uri, str):
        raise CommandError("trnlens.server.openExplorer: uri must be a string")
    root, relpath = server.root_and_relpath(server.path_of(uri)) if uri else (None, None)
    root = root or server.default_root()
    store = server.store(root)
    run = None
    if isinstance(run_id, str) and run_id:
        ids = store.find_run_id(run_id) if store else []
        if len(ids) != 1:
            raise CommandError(f"{'no run' if not ids else f'{len(ids)} runs'} match {run_id!r}")
        run = store.get(ids[0])
    elif isinstance(qualname, str) and relpath and store is not None:
        run = store.latest(relpath, qualname)
    if run is not None and run.get("backend") != "neuron":
        # said before reaching for the host: a CPU or CUDA run has no NEFF/NTFF to ingest
        backend = str(run.get("backend") or "unknown").upper()
        which = f"the latest run of {qualname}" if run_id is None else f"run {run_id}"
        raise CommandError(
            f"{which} ran on {backend}, so it has no Neuron profile to open: Neuron Explorer "
            'shows runs made on Trainium (trnlens.backend "neuron" on a Trainium target)'
        )
    settings = server.config.settings_for(root)
    try:
        target = _build_target(
            settings.target_named(arg.get("target") or (run or {}).get("target")), root
        )
        ports = Ports(int(arg.get("uiPort") or UI_PORT), int(arg.get("apiPort") or API_PORT))
        server.runs.reached(target)  # its shared ssh connection closes with the server
        pool = getattr(server, "explorer_tunnels", None)
        if pool is None:
            pool = server.explorer_tunnels = Pool()  # closed when the server exits
        run_dir = store.artifacts / run["run_id"] if run and store else None
        opened = await launch.open_explorer(
            target, run, run_dir, pool, ports, launch.default_workdir(root)
        )
    except (KeyError, TargetError, ExplorerError, ValueError) as exc:
        message = str(exc.args[0]) if isinstance(exc, KeyError) else str(exc)
        raise CommandError(message) from None
    server.show(f"trnlens: {opened.message}")
    window = server.client_capabilities.window
    if window and window.show_document and window.show_document.support:
        server.window_show_document(types.ShowDocumentParams(uri=opened.url, external=True))
    return {
        "url": opened.url,
        "apiUrl": opened.api_url,
        "displayNames": opened.display_names,
        "tunnelReused": opened.tunnel_reused,
        "message": opened.message,
    }


async def report(server: TrnlensServer, *args: Any) -> dict:
    """{uri?, qualname?, runId?, show?} -> {path, uri, root, runIds, reused}: the run report (see
    ``lsp/report.py``)."""
    from trnlens.lsp import report as run_report

    try:
        return await run_report.report(server, _argument(args))
    except run_report.ReportRefused as exc:
        raise CommandError(str(exc)) from None


HANDLERS = {
    PROFILE: profile,
    CANCEL: cancel,
    SELECT_TARGET: select_target,
    CLEAR_RESULTS: clear_results,
    COMPARE: compare,
    MEASURE_FIX: measure_fix,
    OPEN_EXPLORER: open_explorer,
    REPORT: report,
}
