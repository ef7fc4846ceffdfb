"""``trnlens.server.openExplorer``: a run's Neuron profile in Neuron Explorer on its target.

The run is ``runId``, else the latest run of uri/qualname; none: Explorer's profile list. A remote
target is reached through an SSH tunnel, kept in :class:`Tunnels` for the next opening and closed
with the server.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from trnlens.lsp.command_args import ExplorerArgument
from trnlens.lsp.context import Context
from trnlens.lsp.errors import CommandError
from trnlens.lsp.report import shown_run
from trnlens.lsp.runs import Runs, build_target
from trnlens.targets.nodes import NodesTarget

if TYPE_CHECKING:  # the explorer's modules load on the first opening, not with the server
    from trnlens.explorer.tunnel import Pool


class Tunnels:
    """The SSH tunnels to Neuron Explorer, made on the first opening, closed with the server."""

    def __init__(self) -> None:
        self._pool: Pool | None = None

    def pool(self) -> Pool:
        if self._pool is None:
            from trnlens.explorer.tunnel import Pool

            self._pool = Pool()
        return self._pool

    async def close(self) -> None:
        if self._pool is not None:
            await asyncio.to_thread(self._pool.close_all)


async def open_explorer(
    ctx: Context, runs: Runs, tunnels: Tunnels, arg: ExplorerArgument
) -> dict[str, Any]:
    """-> {url, apiUrl, displayNames, tunnelReused, message}."""
    # The explorer's modules load on the first opening, in a worker thread: a first import
    # reads files, a wait for the disk on a machine that sat idle (issue 30).
    launch, tunnel, ssh = await asyncio.to_thread(_explorer_modules)
    API_PORT, UI_PORT, ExplorerError = tunnel.API_PORT, tunnel.UI_PORT, tunnel.ExplorerError  # noqa: N806
    Ports, TargetError = tunnel.Ports, ssh.TargetError  # noqa: N806

    uri, qualname, run_id = arg.uri, arg.qualname, arg.run_id
    if not run_id and uri:  # the run the editor shows there (the lens's), as the report does
        run_id = shown_run(ctx.documents.get(uri), qualname)
    root, relpath = ctx.root_and_relpath(ctx.path_of(uri)) if uri else (None, None)
    root = root or ctx.default_root()
    store = ctx.store(root)
    run = None
    if run_id:
        ids = store.find_run_id(run_id) if store else []
        if len(ids) != 1 or store is None:
            raise CommandError(f"{'no run' if not ids else f'{len(ids)} runs'} match {run_id!r}")
        run = store.get(ids[0])
    elif qualname and relpath and store is not None:
        run = store.latest(relpath, qualname)
    if run is not None and run.get("backend") != "neuron":
        # said before reaching for the host: a CPU or CUDA run has no NEFF/NTFF to ingest
        backend = str(run.get("backend") or "unknown").upper()
        named = run.get("function", {}).get("qualname") or qualname
        which = f"the run of {named}" if named else f"run {run.get('run_id')}"
        raise CommandError(
            f"{which} ran on {backend}, so it has no Neuron profile to open: Neuron Explorer "
            'shows runs made on Trainium (trnlens.backend "neuron" on a Trainium target)'
        )
    settings = ctx.config.settings_for(root)
    try:
        named = settings.target_named(arg.target or (run or {}).get("target"))
        target = build_target(named, root, settings.targets)
        if isinstance(target, NodesTarget):  # several hosts: rank 0's, the first
            target = target.nodes[0]
        ports = Ports(arg.ui_port or UI_PORT, arg.api_port or API_PORT)
        runs.reached(target)  # its shared ssh connection closes with the server
        run_dir = store.artifacts / run["run_id"] if run and store else None
        opened = await launch.open_explorer(
            target, run, run_dir, tunnels.pool(), ports, launch.default_workdir(root)
        )
    except (KeyError, TargetError, ExplorerError, ValueError) as exc:
        message = str(exc.args[0]) if isinstance(exc, KeyError) else str(exc)
        raise CommandError(message) from None
    ctx.show(f"trnlens: {opened.message}")
    ctx.client.show_document(opened.url)
    return {
        "url": opened.url,
        "apiUrl": opened.api_url,
        "displayNames": opened.display_names,
        "tunnelReused": opened.tunnel_reused,
        "message": opened.message,
    }


def _explorer_modules() -> tuple[Any, Any, Any]:
    from trnlens.explorer import launch, tunnel
    from trnlens.targets import ssh

    return launch, tunnel, ssh
