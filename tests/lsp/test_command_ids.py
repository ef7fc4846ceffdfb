"""Command ids are defined once (lsp/command_ids.py): the server registers exactly those, no other
module spells one out, and the extension names none the server does not have."""

from __future__ import annotations

import re
from pathlib import Path

from trnlens.lsp import command_ids, commands

REPO = Path(__file__).resolve().parents[2]
SERVER = REPO / "server" / "trnlens"
EXTENSION = REPO / "extension" / "src"
ID = re.compile(r"""["'](trnlens\.server\.[A-Za-z]+)["']""")


def test_the_server_registers_every_id_and_no_other():
    assert set(commands.HANDLERS) == set(command_ids.ALL)


def test_no_other_server_module_spells_a_command_id():
    spelled = {
        str(path.relative_to(SERVER)): ID.findall(path.read_text("utf-8"))
        for path in SERVER.rglob("*.py")
        if path.name != "command_ids.py"
    }
    assert {path: ids for path, ids in spelled.items() if ids} == {}


def test_the_extension_names_only_commands_the_server_has():
    named = {
        found for path in EXTENSION.rglob("*.ts") for found in ID.findall(path.read_text("utf-8"))
    }
    assert named, "the extension should call server commands"
    assert named <= set(command_ids.ALL), named - set(command_ids.ALL)
