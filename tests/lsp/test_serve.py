"""``trnlens serve``: stdio is what every other test uses; here, ``--tcp PORT`` for debugging."""

from __future__ import annotations

import asyncio
import socket
import subprocess

from lsprotocol import types
from pytest_lsp.client import make_test_lsp_client
from trnlens.cli import build_parser

from .session import SERVER, capabilities, workspace


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_is_a_subcommand_with_tcp_option():
    args = build_parser().parse_args(["serve", "--tcp", "2087"])
    assert args.command == "serve" and args.tcp == 2087 and args.host == "127.0.0.1"


async def test_serve_over_tcp_answers_lenses(tmp_path):
    root = workspace(tmp_path)
    port = _free_port()
    server = subprocess.Popen([*SERVER, "--tcp", str(port)], cwd=root, stderr=subprocess.PIPE)
    client = make_test_lsp_client()
    try:
        for _ in range(100):  # the server needs a moment to listen
            try:
                await client.start_tcp("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.1)
        await client.initialize_session(
            types.InitializeParams(capabilities=capabilities(), root_uri=root.as_uri())
        )
        uri = (root / "model.py").as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(uri, "python", 1, (root / "model.py").read_text())
            )
        )
        found = await client.text_document_code_lens_async(
            types.CodeLensParams(types.TextDocumentIdentifier(uri))
        )
        assert "rmsnorm_naive" in {lens.command.arguments[0]["qualname"] for lens in found}
        await client.shutdown_async(None)
        client.exit(None)
        assert server.wait(10) == 0  # `exit` after `shutdown` ends the server cleanly
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        # pygls' TCP client stops only once the socket is closed, by the server going away.
        await asyncio.wait_for(client.stop(), 10)
