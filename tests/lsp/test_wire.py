"""Command arguments structured by the server's converter (lsp/wire.py, lsp/command_args.py):
strict JSON types, camelCase keys, and a refusal that names each problem."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.protocol import JsonRPCResponseMessage
from trnlens.lsp import command_ids, notebooks
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


def _answers_a_session_sends() -> list[object]:
    """One of each message the server sends, with the optional parts a real run fills in."""
    where = types.Range(types.Position(3, 4), types.Position(3, 20))
    command = types.Command(
        "profile", "trnlens.profile", arguments=[{"uri": "file:///a.py", "n": 1.5}]
    )
    diagnostic = types.Diagnostic(
        where,
        "a naive RMSNorm: 6 dispatches",
        severity=types.DiagnosticSeverity.Warning,
        code="TRN101",
        code_description=types.CodeDescription("https://example.com/TRN101"),
        source="trnlens",
        tags=[types.DiagnosticTag.Unnecessary],
        related_information=[
            types.DiagnosticRelatedInformation(types.Location("file:///b.py", where), "here")
        ],
        data={"fix": [1, 2], "share": 0.5, "ok": True, "none": None},
    )
    edit = types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                types.OptionalVersionedTextDocumentIdentifier("file:///a.py", 3),
                [types.TextEdit(where, "torch.rms_norm(x, (64,))")],
            )
        ]
    )
    fix = types.CodeAction(
        "use torch.rms_norm",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        edit=edit,
        command=command,
        is_preferred=True,
    )
    tooltip = types.MarkupContent(types.MarkupKind.Markdown, "**85%** of the step")
    hint = types.InlayHint(
        types.Position(3, 30),
        [types.InlayHintLabelPart("85% · 192 ms", tooltip=tooltip, command=command)],
        kind=types.InlayHintKind.Type,
        padding_left=True,
    )
    return [
        types.CodeActionResponse(1, [fix, command]),
        types.HoverResponse(2, types.Hover(tooltip, where)),
        types.InlayHintResponse(3, [hint]),
        types.CodeLensResponse(4, JsonLenses([types.CodeLens(where, command)])),
        types.ExecuteCommandResponse(5, {"runId": "r1", "figures": [1, 2.5]}),
        types.PublishDiagnosticsNotification(
            params=types.PublishDiagnosticsParams("file:///a.py", [diagnostic], version=3)
        ),
        types.ShowMessageRequest(
            6,
            types.ShowMessageRequestParams(
                types.MessageType.Info, "profile on?", [types.MessageActionItem("local")]
            ),
        ),
        types.ShowDocumentRequest(7, types.ShowDocumentParams("file:///a.py", selection=where)),
        types.WorkDoneProgressCreateRequest(8, types.WorkDoneProgressCreateParams("t")),
        types.ProgressNotification(params=types.ProgressParams("t", {"kind": "report"})),
        types.CodeLensRefreshRequest(9),
    ]


def test_the_server_writes_its_converters_hooks_before_the_loop_runs():
    # cattrs writes a class's hook the first time a value of it is converted: on the event loop
    # the first code action answered took 70-80 ms of CPU on CI (the loop guard failed two
    # tests). After create_server() no message the server sends needs a hook written.
    server = create_server()
    converter = server.protocol._converter
    unstructure = converter._unstructure_func.dispatch
    before = unstructure.cache_info().misses
    for message in _answers_a_session_sends():
        assert converter.unstructure(message)["jsonrpc"] == "2.0"
    # A request on a notebook's cell is moved to the notebook's lines as JSON (lsp/notebooks.py),
    # through the same converter.
    assert notebooks._CONVERTER is converter
    document, at = types.TextDocumentIdentifier("vscode-notebook-cell:/a#c1"), types.Position(1, 2)
    assert converter.unstructure(types.HoverParams(document, at))["position"]["character"] == 2
    assert converter.unstructure(types.CodeLensParams(document))["textDocument"]
    assert unstructure.cache_info().misses == before

    structure = converter._structure_func.dispatch
    before = structure.cache_info().misses
    raw = converter.unstructure(
        types.CodeActionRequest(
            1,
            types.CodeActionParams(
                types.TextDocumentIdentifier("file:///a.py"),
                types.Range(types.Position(0, 0), types.Position(1, 0)),
                types.CodeActionContext([_answers_a_session_sends()[0].result[0].diagnostics[0]]),
            ),
        )
    )
    assert converter.structure(raw, types.CodeActionRequest).params.context.diagnostics
    assert structure.cache_info().misses == before
