"""``trnlens profile --nproc-per-node N``: the per-rank table from the command line, the option
from a target's settings, and a bad count refused before anything runs."""

from __future__ import annotations

import json

from trnlens.agent.protocol import SCHEMA_VERSION

from tests.ranks.conftest import IMBALANCED

from .conftest import trnlens

FAST = ["--backend", "cpu", "--warmup", "1", "--steps", "3", "--repeats", "3", "--quiet"]


def test_the_per_rank_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "ranks_step.py").write_text(IMBALANCED.lstrip("\n"))
    done = trnlens("profile", "--nproc-per-node", "2", *FAST, "ranks_step.py::step", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Ranks  (2 ranks · slowest rank 1 (busy +" in out and "process group gloo" in out
    header = next(line for line in out.splitlines() if line.strip().startswith("Rank  Host"))
    assert header.split() == ["Rank", "Host", "Wall", "Busy", "CPU", "(step)", "Dispatches",
                              "In", "collectives", "Waiting", "Exposed", "Bandwidth", "Timing",
                              "median", "Peak", "memory"]  # fmt: skip
    rows = [line.split() for line in out.splitlines() if line.startswith(("  0 ", "  1 *"))]
    assert [r[0] for r in rows] == ["0", "1"] and rows[1][1] == "*"
    assert "all_reduce  ranks_step.py:" in out
    # each rank's peak, and the rank that runs out first (the same step: the same sizes)
    assert all(r[-1] in ("kB", "KB", "MB") for r in rows), rows
    assert "  memory: rank " in out and " nearest its memory limit: peak " in out
    assert "Memory (rank 0, cpu," in out
    assert "Stragglers (HTA's late start of the last all_reduce in each step)" in out


def test_a_targets_nproc_per_node_is_used_and_json_has_the_ranks(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.trnlens.targets.two]\nkind = 'local'\nnproc_per_node = 2\n"
    )
    (tmp_path / "ranks_step.py").write_text(IMBALANCED.lstrip("\n"))
    done = trnlens("profile", "--target", "two", *FAST, "--format", "json", "ranks_step.py::step",
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["schema_version"] == SCHEMA_VERSION and result["world_size"] == 2
    assert [r["rank"] for r in result["ranks"]] == [0, 1]


def test_a_bad_rank_count_is_refused(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "ranks_step.py").write_text(IMBALANCED.lstrip("\n"))
    done = trnlens("profile", "--nproc-per-node", "0", *FAST, "ranks_step.py::step", cwd=tmp_path)
    assert done.returncode == 2 and "--nproc-per-node must be at least 1" in done.stderr
    (tmp_path / "pyproject.toml").write_text(
        "[tool.trnlens.targets.bad]\nkind = 'local'\nnproc_per_node = 'two'\n"
    )
    done = trnlens("profile", "--target", "bad", *FAST, "ranks_step.py::step", cwd=tmp_path)
    assert done.returncode == 2 and "nproc_per_node must be a positive integer" in done.stderr
