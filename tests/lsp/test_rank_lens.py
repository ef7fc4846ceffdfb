"""A multi-rank run's lens (lsp/lenses.py): its ranks said once, the slowest rank's figures
labelled with that rank; and the collective's hint within VS Code's default hint length."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from trnlens.lsp import hints, lenses, rank_hints
from trnlens.lsp.documents import ProfiledDocument
from trnlens.results import Result

TEXT = """import torch
import torch.distributed as dist


def step(x):
    y = torch.mul(x, 2)
    dist.all_reduce(y)
    return y
"""


def _result() -> Result:
    return Result(
        {
            "run_id": "r1", "created_at": "2026-01-01T00:00:00+00:00", "target": "local",
            "backend": "cpu", "device": "cpu", "time_basis": "cpu", "mode": "inference",
            "device_time_per_step_us": 100.0, "cpu_time_per_step_us": 150.0,
            "dispatches_per_step": 4, "error": None, "world_size": 2,
            "lines": [{"path": "m.py", "line": 6, "device_us": 100.0, "cpu_us": 100.0,
                       "dispatches": 1, "ops": {}}],
            "slowest_rank": 1, "rank_spread": {"slowest_vs_others_pct": 38.0},
            "ranks": [
                {"rank": 0, "device_time_per_step_us": 100.0, "cpu_time_per_step_us": 150.0,
                 "dispatches_per_step": 4},
                {"rank": 1, "device_time_per_step_us": 400.0, "cpu_time_per_step_us": 450.0,
                 "dispatches_per_step": 16},
            ],
            "collectives": [
                {"name": "all_reduce", "path": "m.py", "line": 7, "share_of_step": 0.24,
                 "per_rank": [
                     {"rank": 0, "time_per_step_us": 5770.0, "wait_per_step_us": 1360.0},
                     {"rank": 1, "time_per_step_us": 4410.0, "wait_per_step_us": 0.0},
                 ]},
            ],
            "function": {"path": "m.py", "qualname": "step", "line": 5, "source_hash": None},
        }
    )  # fmt: skip


def _doc() -> ProfiledDocument:
    doc = ProfiledDocument("file:///p/m.py", Path("/p/m.py"), Path("/p"), TEXT, generation=1)
    result = _result()
    result.data["function"]["source_hash"] = doc.analysis().source_hash("step")
    doc.place(result)
    return doc


def test_the_lens_says_2_ranks_once_and_shows_the_slowest_ranks_figures_labelled():
    doc = _doc()
    [placed] = lenses.code_lenses(doc, "local", "torch", ranks=2)
    lens = types.CodeLens(
        types.Range(types.Position(4, 0), types.Position(4, 0)), data=placed["data"]
    )
    title = lenses.resolve(doc, lens, lambda uri, q: None).command.title
    assert title.startswith(
        "▶ Profile · rank 1 of 2 (slowest: busy +38%) · 24% in all_reduce · 400 µs CPU (ops)"
    ), title
    assert "16 dispatches" in title and "4 dispatches" not in title
    assert title.count("rank") == 1 and "2 ranks" not in title


def test_the_collective_hint_fits_43_characters_and_its_tooltip_has_every_rank():
    doc = _doc()
    everywhere = types.Range(types.Position(0, 0), types.Position(20, 0))
    [hint] = rank_hints.inlay_hints(doc, everywhere)
    assert hint.label == "all_reduce: r0 waits 1.36 ms of 5.77 ms"
    assert len(hint.label) <= 43
    assert "wait r0 1.36 ms · r1 0 ns (in it: 5.77 ms, 4.41 ms per step)" in str(hint.tooltip)


def test_a_multi_rank_runs_line_hints_say_they_are_rank_0s():
    doc = _doc()
    everywhere = types.Range(types.Position(0, 0), types.Position(20, 0))
    [hint] = hints.inlay_hints(doc, everywhere)
    assert hint.label.strip().startswith("r0 100% · 100 µs"), hint.label
    assert "of rank 0" in str(hint.tooltip)
