"""An SSH target whose interpreter has torch-xla (issue 40, point 8): a fine-tuning step profiled
over a real OpenSSH server (tests/targets/sshd.py) gives what the local run gives: the step's
graphs, backward on the forward's modules and lines, library lines with the remote host's paths,
and the library files the server reads back over the connection by digest."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from trnlens.jobs import ProfileRequest, run_profile
from trnlens.store import Store
from trnlens.targets.ssh import SshTarget

from tests.targets.conftest import needs_sshd
from tests.xla.test_xla_training import FIXTURE, TEXT, line_of

pytestmark = needs_sshd


def test_a_fine_tuning_step_over_ssh_reads_as_it_does_locally(
    test_host, xla_python, tmp_path, ssh_cache
):
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(FIXTURE, root / "training.py")
    (tmp_path / "tmp").mkdir()
    target = SshTarget(
        name="trn-xla", host=test_host.alias, ssh_args=test_host.ssh_args(),
        python=str(xla_python), workdir=str(tmp_path / "remote work"), backend="xla",
        env={"PJRT_DEVICE": "CPU", "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path / "tmp")},
    )  # fmt: skip
    request = ProfileRequest(
        variants=[{"path": str(root / "training.py"), "qualname": "sgd_step"}],
        project_root=root, backend="xla", warmup=2, steps=2, repeats=3,
    )  # fmt: skip
    with Store(root) as store:
        outcome = asyncio.run(run_profile(request, store, target)).data
    assert outcome["error"] is None, outcome["error"]
    assert outcome["target"] == "trn-xla" and outcome["backend"] == "xla"
    x = outcome["xla"]
    assert x["per_step"]["graphs"] == 1 and x["skipped"] == []
    lines = {row["line"]: row for row in x["lines"]}
    forward = line_of(TEXT, "return self.down(h)")
    assert lines[forward]["backward_ir_nodes"] > 0
    assert {m["name"] for m in x["modules"]} >= {"model", "model.up", "model.down"}
    linear = next(r for r in x["library_lines"] if r["path"].endswith("nn/modules/linear.py"))
    assert Path(linear["path"]).is_absolute() and linear["ir_nodes"] > 0
    # the library files the rules read after the run came with digests (remote parity)
    files = {f["path"]: f for f in outcome["library_files"]}
    assert "sha256" in files[linear["path"]]
