"""Two ranks on one SSH target (the test sshd): torchrun runs there, nothing installed, and the
run comes back as one result with each rank's profile; nothing is left on the host."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.agent.conftest import line_of
from tests.ranks.conftest import IMBALANCED, live_processes_naming
from tests.targets.conftest import needs_sshd
from tests.targets.test_ssh import profile, remote_runs, target

pytestmark = needs_sshd


def test_two_ranks_over_ssh(test_host, remote_python, tmp_path, ssh_cache):
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    # with a module from a library (torch.nn's LayerNorm), whose file the server reads
    library_call = "    y = NORM(y)\n    dist.all_reduce(y)"
    step = IMBALANCED.lstrip("\n").replace("    dist.all_reduce(y)", library_call)
    step = step.replace(
        "\n\n\ndef make_inputs", "\nNORM = torch.nn.LayerNorm(192)\n\n\ndef make_inputs"
    )
    (root / "ranks_step.py").write_text(step)
    tgt = target(test_host, remote_python, tmp_path, nproc_per_node=2)
    outcome, phases = profile(root, tgt, "ranks_step.py::step", steps=3, nproc_per_node=2)

    assert outcome["error"] is None and outcome["target"] == "trn2-dev"
    assert outcome["world_size"] == 2 and outcome["slowest_rank"] == 1
    (collective,) = outcome["collectives"]
    assert (collective["path"], collective["line"]) == (
        "ranks_step.py",
        line_of(root, "ranks_step.py", "dist.all_reduce(y)"),
    )
    assert any("rank 0:" in p.message for p in phases)  # progress came back
    # The library files the ranks executed came back by digest, for the static rules.
    hashed = {e["path"]: e["sha256"] for e in outcome["library_files"] if e.get("sha256")}
    assert hashed and set(outcome["library_copies"]) == set(hashed)
    for path, copy in outcome["library_copies"].items():
        assert hashlib.sha256(Path(copy).read_bytes()).hexdigest() == hashed[path]
    run_dir = root / ".trnlens" / "artifacts" / outcome["run_id"]
    for rank in (0, 1):
        assert (run_dir / f"rank-{rank}" / "trace.json").stat().st_size > 0
    assert remote_runs(tmp_path) == []
    assert live_processes_naming(str(tmp_path / "remote work")) == []


def test_a_rank_that_raises_over_ssh_is_named_and_nothing_is_left(
    test_host, remote_python, tmp_path, ssh_cache
):
    from tests.ranks.test_faults import RAISES

    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / "ranks_step.py").write_text(RAISES.lstrip("\n"))
    tgt = target(test_host, remote_python, tmp_path)
    outcome, _ = profile(root, tgt, "ranks_step.py::step", steps=3, nproc_per_node=2)
    error = outcome["error"]
    assert error["rank"] == 1 and "rank 1: ValueError: rank one gives up" in error["message"]
    assert (error["path"], error["line"]) == (
        "ranks_step.py",
        line_of(root, "ranks_step.py", "raise ValueError"),
    )
    assert remote_runs(tmp_path) == []
    assert live_processes_naming(str(tmp_path / "remote work")) == []
