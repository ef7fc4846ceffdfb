"""``trnlens explorer [--target NAME] [RUN]``: a run's profile (or the list) in Neuron Explorer.

Prints the URL on its first line as soon as both Explorer ports answer, then keeps the SSH tunnel
up (reopening it when it dies) until interrupted. RUN is a run id or a unique prefix of one; the
target defaults to the run's own.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from trnlens import project
from trnlens.cli import exitcodes
from trnlens.explorer import launch
from trnlens.explorer.tunnel import API_PORT, UI_PORT, ExplorerError, Pool, Ports
from trnlens.store import Store
from trnlens.targets import registry
from trnlens.targets.nodes import NodesTarget
from trnlens.targets.ssh import SshTarget, TargetError


def register(sub) -> None:
    parser = sub.add_parser(
        "explorer",
        help="open a run's Neuron profile in Neuron Explorer (through an SSH tunnel)",
        description="Start neuron-explorer on the target when needed, ingest the run's profile "
        "from the local store and forward its UI and API ports to 127.0.0.1. Prints the URL, "
        "then holds the tunnel until interrupted (Ctrl-C).",
    )
    parser.add_argument("run", nargs="?", help="run id or prefix (default: the profile list)")
    parser.add_argument("--target", help="target name (default: the run's target, else local)")
    parser.add_argument("--project", default=".", help="project directory (default: here)")
    parser.add_argument("--ui-port", type=int, default=UI_PORT, help="Explorer UI port (3001)")
    parser.add_argument("--api-port", type=int, default=API_PORT, help="Explorer API port (3002)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = project.find_root(Path(args.project).resolve())
    store = Store(root)
    try:
        result, run_dir = None, None
        if args.run:
            ids = store.find_run_id(args.run)
            if len(ids) != 1:
                what = "no run" if not ids else f"{len(ids)} runs"
                print(f"trnlens: {what} match {args.run!r}", file=sys.stderr)
                return exitcodes.USAGE
            result = store.get(ids[0])
            run_dir = store.artifacts / ids[0]
        name = args.target or (result or {}).get("target") or registry.LOCAL
        target = registry.resolve(name, root)
        if isinstance(target, NodesTarget):  # several hosts: rank 0's, the first
            target = target.nodes[0]
        ports = Ports(args.ui_port, args.api_port)
    except (TargetError, ExplorerError) as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return exitcodes.TARGET_UNUSABLE
    finally:
        store.close()
    try:
        return asyncio.run(_serve(target, result, run_dir, ports, launch.default_workdir(root)))
    except ExplorerError as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return exitcodes.TARGET_UNUSABLE


async def _serve(target, result, run_dir, ports: Ports, workdir: Path) -> int:
    pool = Pool()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        opened = await launch.open_explorer(target, result, run_dir, pool, ports, workdir)
        print(opened.url, flush=True)
        print(f"trnlens: {opened.message}; API {opened.api_url}", file=sys.stderr, flush=True)
        if not isinstance(target, SshTarget):
            return exitcodes.OK  # nothing to hold: explorer runs here
        print("trnlens: holding the tunnel; Ctrl-C closes it", file=sys.stderr, flush=True)
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), 5)
            except asyncio.TimeoutError:
                if not any(t.alive() for t in pool.tunnels.values()):
                    print("trnlens: the tunnel died; reopening", file=sys.stderr, flush=True)
                    try:
                        await pool.get(target, ports)
                    except ExplorerError as exc:
                        print(f"trnlens: {exc}", file=sys.stderr, flush=True)
        return exitcodes.OK
    finally:
        pool.close_all()
