"""Run progress values carry the run's state for machines under ``trnlens`` (lsp/progress.py).

A stand-in for pygls's server (its capabilities, work-done progress and protocol) records what
would go over the wire, encoded as the server encodes it.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from trnlens.agent.protocol import Progress
from trnlens.lsp.progress import RunProgress, run_state


class StandInServer:
    def __init__(self, progress_supported: bool = True):
        window = types.WindowClientCapabilities(work_done_progress=progress_supported)
        self.client_capabilities = types.ClientCapabilities(window=window)
        self.sent: list[dict] = []
        self.created: list[str] = []
        converter = default_converter()

        async def create_async(token: str) -> None:
            self.created.append(token)

        def notify(method: str, params: types.ProgressParams) -> None:
            assert method == types.PROGRESS
            self.sent.append(json.loads(json.dumps(converter.unstructure(params))))

        self.work_done_progress = SimpleNamespace(create_async=create_async, tokens={"t": 1})
        self.protocol = SimpleNamespace(notify=notify)


async def test_a_runs_values_carry_its_state_beside_the_words():
    server = StandInServer()
    progress = RunProgress(server, "t", "Compare f", "compare", "f")  # type: ignore[arg-type]
    await progress.begin("queued behind g on local (1 ahead)", "queued")
    progress.report("starting the agent on local")
    state = Progress("r1", "measuring", 1, "5 profiled steps", variants=3, step=2, steps=5)
    progress.report("measuring 5 profiled steps", state)
    progress.end("compared f: ...", "raised")
    assert server.created == ["t"]
    values = [sent["value"] for sent in server.sent]
    assert [v["kind"] for v in values] == ["begin", "report", "report", "end"]
    assert values[0]["title"] == "Compare f" and values[0]["cancellable"] is True
    assert values[0]["trnlens"] == {"state": "queued", "kind": "compare", "qualname": "f"}
    assert values[1]["trnlens"] == {"state": "starting"}
    assert values[2]["message"] == "measuring 5 profiled steps"
    assert values[2]["trnlens"] == {
        "state": "measuring", "variant": 1, "variants": 3, "step": 2, "steps": 5,
    }  # fmt: skip
    assert values[3]["trnlens"] == {"state": "ended", "outcome": "raised"}
    assert server.work_done_progress.tokens == {}  # the token is released at the end
    progress.end("again", "failed")  # ended already: nothing more is sent
    assert len(server.sent) == 4


async def test_a_client_without_progress_gets_none():
    server = StandInServer(progress_supported=False)
    progress = RunProgress(server, "t", "Profile f", "profile", "f")  # type: ignore[arg-type]
    await progress.begin("starting on local", "starting")
    progress.report("importing torch", Progress("r", "importing"))
    progress.end("f: 1 ms", "succeeded")
    assert server.sent == [] and server.created == []


def test_an_unknown_outcome_is_refused():
    with pytest.raises(ValueError, match="unknown run outcome 'done'"):
        run_state("ended", outcome="done")


def test_a_reports_words_say_the_phase_once():
    """Issue 42: "warm-up warm-up 2 of 3" (the agent's step words start with their phase)."""
    assert Progress(None, "warm-up", 0, "warm-up 2 of 3", 1, 2, 3).words() == "warm-up 2 of 3"
    assert Progress(None, "measuring", 0, "profiled step 2 of 5").words() == (
        "measuring profiled step 2 of 5"
    )
    assert Progress(None, "importing", 0, "torch").words() == "importing torch"
    assert Progress(None, "exporting").words() == "exporting"
