"""``trnlens serve``: the language server, over stdio (what editors start) or TCP (debugging)."""

from __future__ import annotations

import argparse
import logging
import sys

from trnlens.cli import exitcodes


def register(sub) -> None:
    parser = sub.add_parser(
        "serve",
        help="run the language server (stdio; --tcp PORT for debugging)",
        description="Run the trnlens language server. Editors start it over stdio; "
        "--tcp PORT listens on 127.0.0.1 instead, for attaching a client by hand.",
    )
    parser.add_argument("--tcp", type=int, metavar="PORT", help="listen on 127.0.0.1:PORT")
    parser.add_argument("--host", default="127.0.0.1", help="address for --tcp (127.0.0.1)")
    parser.add_argument(
        "--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # stdout carries the protocol: logs go to stderr, which editors show in their output panel.
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level, format="%(levelname)s %(name)s: %(message)s"
    )
    from trnlens.lsp.server import create_server  # pygls loads only for this subcommand

    server = create_server()
    if args.tcp is not None:
        server.start_tcp(args.host, args.tcp)
    else:
        server.start_io()
    return exitcodes.OK
