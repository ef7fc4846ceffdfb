"""Command arguments structured by the server's converter (lsp/wire.py, lsp/command_args.py):
strict JSON types, camelCase keys, and a refusal that names each problem."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.protocol import JsonRPCResponseMessage
from trnlens.lsp import command_ids
from trnlens.lsp.command_args import ExplorerArgument, FunctionArgument, SelectTargetArgument
from trnlens.lsp.errors import CommandError
from trnlens.lsp.server import create_server
from trnlens.lsp.wire import BadArgument, JsonLenses, structure_argument


def test_an_argument_is_structured_with_its_defaults_and_wire_names():
    found = structure_argument(
        ({"uri": "file:///a.py", "qualname": "f", "x": 1},), FunctionArgument
    )
    assert found == FunctionArgument("file:///a.py", "f", None)  # unknown keys are ignored
    found = structure_argument(({"runId": "r1", "uiPort": 8001},), ExplorerArgument)
    assert found.run_id == "r1" and found.ui_port == 8001 and found.api_port is None
    assert structure_argument((None,), SelectTargetArgument) == SelectTargetArgument(None, True)
    assert structure_argument((), SelectTargetArgument) == SelectTargetArgument(None, True)


@pytest.mark.parametrize(
    "args, kind, said",
    [
        (({"uri": 1, "qualname": "f"},), FunctionArgument, "uri: invalid value for type"),
        (({"uri": "u"},), FunctionArgument, "qualname: required field missing"),
        (({"uiPort": True},), ExplorerArgument, "uiPort: invalid value for type"),
        (({"ask": "no"},), SelectTargetArgument, "ask: invalid value for type"),
        ((["f"],), FunctionArgument, "takes one object argument, not an array"),
    ],
    ids=[
        "a number for a string",
        "missing",
        "a boolean for a port",
        "a string for a boolean",
        "not an object",
    ],  # fmt: skip
)
def test_a_bad_argument_names_its_problem(args, kind, said):
    with pytest.raises(BadArgument, match=said):
        structure_argument(args, kind)


async def test_the_server_refuses_a_bad_argument_in_words():
    server = create_server()
    profile = server.protocol.fm.commands[command_ids.PROFILE]
    with pytest.raises(CommandError) as refused:
        await profile({"uri": "file:///a.py"})
    assert refused.value.message == (
        "trnlens.server.profile takes {uri, qualname, target?}: qualname: required field missing"
    )


def test_a_lens_answer_keeps_its_json_dicts_and_unstructures_the_rest():
    server = create_server()
    ready = {"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}}
    built = types.CodeLens(types.Range(types.Position(2, 0), types.Position(2, 0)))
    # how pygls sends a server's answer: its result typed Any, unstructured by runtime type
    answer = JsonRPCResponseMessage(id=1, result=JsonLenses([ready, built]), jsonrpc="2.0")
    found = server.protocol._converter.unstructure(answer)["result"]
    assert found[0] is ready  # passed on as it is, not walked key by key
    assert found[1] == {"range": {"start": {"line": 2, "character": 0},
                                  "end": {"line": 2, "character": 0}}}  # fmt: skip
