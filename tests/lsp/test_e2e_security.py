"""Security end to end (issue 13): opening, editing, analysing and watching a workspace runs none
of its code; a result planted in .trnlens/ cannot put markup into a hover; the server listens on
no network socket (stdio only).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from urllib.parse import unquote

from lsprotocol import types
from markdown_it import MarkdownIt
from trnlens.agent import sources
from trnlens.store import Store

from ..test_store import fake_result
from .session import RUN_TIMEOUT_S, editor, workspace

MARKER_CODE = """\
import pathlib

pathlib.Path(__file__).with_name("EXECUTED-{name}").write_text("ran")
"""

MODEL = """\
import torch

from helpers import helper

open(__file__ + ".EXECUTED", "w").write("ran")  # the module itself, if ever imported


def f(x=torch.ones(4)):
    return helper(x) * 2
"""

# What a planted result may carry: links to commands, images, raw HTML, table breakers.
HOSTILE = (
    "x`|[run me](command:trnlens.profile?%5B%5D)<img src=x onerror=alert(1)>"
    "<script>alert(2)</script>![i](http://evil/p.png)|*"
)


async def test_open_edit_analyse_watch_run_no_workspace_code(tmp_path):
    root = workspace(tmp_path)
    (root / "model.py").write_text(MODEL)
    for name in ("helpers", "conftest", "sitecustomize", "usercustomize", "setup", "__init__"):
        (root / f"{name}.py").write_text(MARKER_CODE.format(name=name))
    (root / "zz-evil.pth").write_text("import os; os.system('touch EXECUTED-pth')\n")
    async with editor(root) as ed:
        uri = ed.open("model.py")
        await ed.lenses(uri)
        await ed.hints(uri)
        await ed.hover(uri, 7)
        ed.edit(uri, 7, 0, "# an edit\n")
        await ed.client.text_document_code_action_async(
            types.CodeActionParams(
                types.TextDocumentIdentifier(uri),
                types.Range(types.Position(0, 0), types.Position(9, 0)),
                types.CodeActionContext(diagnostics=[]),
            )
        )
        (root / "helpers.py").write_text(MARKER_CODE.format(name="helpers-changed"))  # watching
        (root / "model.py").write_text(MODEL + "\n# saved\n")
        await ed.watcher_settled()  # the watcher has re-analysed what it was going to
        await ed.analysis_settled()  # and the edit's debounced analysis has run
        await ed.lenses(uri)
    assert sorted(p.name for p in root.rglob("*EXECUTED*")) == []


async def test_planted_result_cannot_inject_markup_into_hovers(tmp_path):
    root = workspace(tmp_path)
    (root / "model.py").write_text(MODEL)
    planted = fake_result(1, path="model.py", qualname="f")
    planted["ops"] = [{"name": HOSTILE, "calls": 1, "self_cpu_us": 5.0, "self_device_us": 4.0,
                       "input_shapes": [[[4]]]}]  # fmt: skip
    planted["lines"] = [{"path": "model.py", "line": 9, "device_us": 4.0, "cpu_us": 5.0,
                         "dispatches": 1, "ops": {HOSTILE: 1}}]  # fmt: skip
    planted["function"].update(line=8, end_line=9)
    planted["target"] = HOSTILE
    planted["device"] = "<b>dev</b>"
    planted["artifacts"] = [{"kind": "chrome_trace", "path": "../../../../etc/passwd"}]
    failed = fake_result(2, path="model.py", qualname="g", error={
        "kind": "user_code", "type": "E", "message": HOSTILE, "path": "model.py", "line": 1,
        "traceback": None})  # fmt: skip
    text = MODEL + "\n\ndef g(x=torch.ones(4)):\n    return x\n"
    (root / "model.py").write_text(text)
    for result in (planted, failed):  # current, so that the line figures show too
        qualname = result["function"]["qualname"]
        definition = sources.find_definition(text, qualname)
        result["function"]["source_hash"] = sources.source_hash(text, definition)
    with Store(root) as store:
        store.add(planted)
        store.add(failed)
    renderer = MarkdownIt("commonmark", {"html": True}).enable("table")
    async with editor(root) as ed:
        uri = ed.open("model.py")
        hovers = [await ed.hover(uri, line, 4) for line in (7, 8, 11)]
    shown = [h.contents.value for h in hovers if h is not None]
    assert len(shown) == 3, shown
    for text in shown:
        active = [
            (token.type, token.attrGet("href") or token.attrGet("src") or token.content)
            for block in renderer.parse(text)
            for token in [block, *(block.children or [])]
            if token.type in ("link_open", "image", "html_inline", "html_block")
        ]
        # the links a hover has: the run's own trace, inside its run directory, and the run's
        # report (trnlens's own command, with nothing from the result but the stored run id)
        for kind, where in active:
            assert kind == "link_open", (kind, where, text)
            if where.startswith("command:"):
                command, _, arguments = where.partition("?")
                assert command == "command:trnlens.server.report", where
                [argument] = json.loads(unquote(arguments))
                assert argument["runId"] in {planted["run_id"], failed["run_id"]}
                continue
            assert where.startswith("file://"), (kind, where, text)
            assert "/.trnlens/artifacts/" in where and "passwd" not in where
        assert "run me" in renderer.render(text)  # the hostile text is shown, as text


def listening_sockets(pids: set[int]) -> list[str]:
    """Every listening TCP/UDP/unix socket of these processes, as ss prints it."""
    found = []
    for flags in ("-ltnupH", "-lxpH"):
        out = subprocess.run(["ss", flags], capture_output=True, text=True).stdout
        found += [line for line in out.splitlines() if any(f"pid={p}," in line for p in pids)]
    return found


def tree(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        child, parent = map(int, line.split())
        children.setdefault(parent, []).append(child)
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        found.add(current)
        todo += children.get(current, [])
    return found


async def test_server_and_its_agent_listen_on_nothing(tmp_path):
    """stdio for the editor, pipes for the agent: not one listening socket while a run goes."""
    root = workspace(tmp_path)
    async with editor(root) as ed:
        uri = ed.open()
        answer = await ed.click((await ed.lenses(uri))["rmsnorm_naive"])
        seen: list[str] = []
        pids: set[int] = set()
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not ed.progress(answer["token"]) or not isinstance(
            ed.progress(answer["token"])[-1], types.WorkDoneProgressEnd
        ):
            assert time.monotonic() < deadline, "the run did not end"
            pids = tree(ed.client._server.pid)
            seen += listening_sockets(pids)
            await asyncio.sleep(0.3)  # the sampling interval while the run goes
        assert len(pids) >= 2  # the agent was seen beside the server
    assert seen == []
