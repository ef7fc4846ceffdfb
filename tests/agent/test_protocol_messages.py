"""The protocol's typed messages: each written and read back; bad lines refused by name."""

from __future__ import annotations

import json

import pytest
from trnlens.agent.protocol import (
    PHASES,
    SCHEMA_VERSION,
    ArtifactArchive,
    Cancel,
    ErrorMessage,
    FileContents,
    Files,
    Hello,
    Ping,
    Pong,
    Profile,
    Progress,
    ProtocolError,
    ResultMessage,
    Shutdown,
    format_message,
    outcome_of,
    parse_agent_message,
    parse_request,
    progress_from_json,
    to_json,
)

AGENT_MESSAGES = [
    Hello(SCHEMA_VERSION, "0.1.0", 42, "3.11.9", "/usr/bin/python3", None),
    Progress("r1", "measuring", 1, "5 profiled steps", variants=3, step=2, steps=5),
    ResultMessage("r1", {"run_id": "x", "error": None}),
    ErrorMessage("r1", {"kind": "usage", "message": "no such file"}),
    Pong("p", 42, busy="r1"),
    FileContents("f1", [{"sha256": "ab", "data": "eJw="}, {"sha256": "cd", "error": "changed"}]),
    ArtifactArchive("r1", data="H4sI"),
    ArtifactArchive("r1", error="the artifacts are over 32000000 bytes compressed"),
]
REQUESTS = [
    Profile("r1", {"project_root": "/p", "variants": [{"path": "m.py", "qualname": "f"}]}),
    Cancel("r1"),
    Ping("p"),
    Shutdown(),
    Files("f1", ["ab" * 32]),
]


@pytest.mark.parametrize("message", AGENT_MESSAGES, ids=lambda m: m.type)
def test_agent_messages_read_back_as_written(message):
    line = format_message(message)
    assert "\n" not in line and json.loads(line)["type"] == message.type
    assert parse_agent_message(line) == message


@pytest.mark.parametrize("message", REQUESTS, ids=lambda m: m.type)
def test_requests_read_back_as_written(message):
    assert parse_request(format_message(message)) == message


def test_a_profile_request_keeps_its_fields_flat_on_the_wire():
    wire = to_json(Profile("r1", {"steps": 5, "variants": []}))
    assert wire == {"type": "profile", "steps": 5, "variants": [], "id": "r1"}


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "a JSON object with a string 'type'"),
        ('{"type": "progress", "id": "r"}', "progress: missing field 'phase'"),
        ('{"type": "progress", "id": "r", "phase": "dancing"}', "unknown phase 'dancing'"),
        ('{"type": "progress", "id": "r", "phase": "timing", "variant": true}', "variant is True"),
        ('{"type": "progress", "id": "r", "phase": "timing", "step": "3"}', "step is '3'"),
        ('{"type": "hello"}', "hello: missing field 'schema_version'"),
        ('{"type": "result", "id": "r", "result": []}', "result is []"),
        ('{"type": "telemetry"}', "unknown agent message type 'telemetry'"),
        ('{"type": "file-contents", "id": "f", "files": [1]}', "every item of files must be"),
    ],
)
def test_a_bad_agent_line_is_refused_naming_the_field(line, says):
    with pytest.raises(ProtocolError, match=says.replace("(", r"\(").replace("[", r"\[")):
        parse_agent_message(line)


def test_a_bad_request_is_refused_naming_it():
    with pytest.raises(ProtocolError, match="unknown message type 'launch'"):
        parse_request('{"type": "launch"}')
    with pytest.raises(ProtocolError, match="profile: id must be a string or null"):
        parse_request('{"type": "profile", "id": 3}')
    with pytest.raises(ProtocolError, match="every item of sha256 must be a str"):
        parse_request('{"type": "files", "id": "f", "sha256": [1]}')
    with pytest.raises(ProtocolError, match="files: sha256 is 'ab'"):
        parse_request('{"type": "files", "id": "f", "sha256": "ab"}')


def test_unknown_fields_from_a_newer_peer_are_left_out():
    line = '{"type": "progress", "id": "r", "phase": "warm-up", "eta_s": 3}'
    assert parse_agent_message(line) == Progress("r", "warm-up")


def test_an_older_agents_hello_still_names_its_schema():
    """The server refuses it by version (jobs.py), which needs the hello to parse."""
    hello = parse_agent_message('{"type": "hello", "schema_version": 2}')
    assert hello == Hello(schema_version=2)


def test_relayed_progress_is_checked_like_the_agents():
    assert progress_from_json({"id": None, "phase": "starting"}).phase == "starting"
    with pytest.raises(ProtocolError):
        progress_from_json({"phase": "dancing", "id": None})


def test_the_outcome_of_an_answer():
    assert outcome_of(ResultMessage("r", {"error": None})) == "succeeded"
    assert outcome_of(ResultMessage("r", {"error": {"kind": "user_code"}})) == "raised"
    comparison = {"variants": [{"error": None}, {"error": {"kind": "user_code"}}]}
    assert outcome_of(ResultMessage("r", comparison)) == "raised"
    assert outcome_of(ErrorMessage("r", {"kind": "cancelled"})) == "cancelled"
    assert outcome_of(ErrorMessage("r", {"kind": "environment"})) == "failed"


def test_phases_start_with_the_servers_own():
    assert PHASES[0] == "starting" and "measuring" in PHASES
