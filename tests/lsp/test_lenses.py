"""Profile lenses on a big file: the per-version cache, codeLens/resolve, the JSON pass-through."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from trnlens.lsp import lenses, wire
from trnlens.lsp.documents import ProfiledDocument
from trnlens.results import Result

TEXT = """import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def helper(x):
    return x + 1
"""


def _doc() -> ProfiledDocument:
    return ProfiledDocument("file:///p/m.py", Path("/p/m.py"), Path("/p"), TEXT, generation=1)


def _result() -> Result:
    return Result(
        {
            "run_id": "r1", "created_at": "2026-01-01T00:00:00+00:00", "target": "local",
            "backend": "cpu", "device": "cpu", "time_basis": "cpu", "mode": "inference",
            "device_time_per_step_us": 1000.0, "cpu_time_per_step_us": 1100.0,
            "dispatches_per_step": 3, "error": None, "lines": [],
            "function": {"path": "m.py", "qualname": "Block.forward", "line": 9,
                         "source_hash": "sha256:old"},
        }
    )  # fmt: skip


def _titles(found: list[dict]) -> dict[str, str | None]:
    return {
        (lens.get("command") or {"arguments": [lens["data"]]})["arguments"][0]["qualname"]: (
            lens.get("command") or {}
        ).get("title")
        for lens in found
    }


def test_cache_answers_the_same_lenses_until_something_they_show_changes():
    cache, doc = lenses.LensCache(), _doc()
    first = cache.lenses(doc, "local", "torch", frozenset())
    assert _titles(first) == {"Block": "▶ Profile", "Block.forward": "▶ Profile"}
    assert cache.lenses(doc, "local", "torch", frozenset()) is first
    assert cache.lenses(doc, "trn", "torch", frozenset()) is not first
    assert len(cache.lenses(doc, "local", "all", frozenset())) == 4
    running = cache.lenses(doc, "local", "torch", frozenset({"Block.forward"}))
    assert _titles(running)["Block.forward"] is None  # a job state: resolved when shown
    doc.update(TEXT.replace("x + 1", "x + 2"), [])
    edited = cache.lenses(doc, "local", "torch", frozenset())
    assert edited is not first and edited == first


def test_a_placed_run_makes_its_lens_resolve_to_the_figures():
    doc = _doc()
    doc.place(_result())
    (_, placed) = lenses.code_lenses(doc, "local", "torch")
    assert "command" not in placed and placed["data"]["kind"] == lenses.KIND
    lens = types.CodeLens(
        types.Range(types.Position(8, 4), types.Position(8, 4)), data=placed["data"]
    )
    resolved = lenses.resolve(doc, lens, lambda uri, q: None)
    assert resolved.command.title.startswith("▶ Profile · stale · 1.00 ms CPU (ops)")
    cancel = lenses.resolve(doc, lens, lambda uri, q: "running")
    assert cancel.command.title == "■ running · click to cancel"
    assert cancel.command.command == lenses.CANCEL


def test_a_placed_function_keeps_its_lens_under_any_placement():
    doc = _doc()
    run = _result()
    run.data["function"]["qualname"] = "helper"
    doc.place(Result(run.data))
    assert "helper" in _titles(lenses.code_lenses(doc, "local", "torch"))


def test_converter_passes_lens_json_through_and_unstructures_objects():
    converter = wire.converter()
    lens = types.CodeLens(types.Range(types.Position(1, 0), types.Position(1, 0)))
    as_json = {"range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}}}
    answer = converter.unstructure(types.CodeLensResponse(id=1, result=[as_json, lens]))
    assert answer["result"] == [as_json, {"range": converter.unstructure(lens.range)}]
