"""Benchmark: a remote profile over SSH (the connection reused) against local and a plain ssh run.

Starts its own OpenSSH server on 127.0.0.1 (tests/targets/sshd.py; needs root and
openssh-server) whose python has torch but not trnlens, then prints, measured in one run:
  - `trnlens profile` locally (cold agent);
  - the first remote profile (new connection, agent bundle uploaded);
  - a repeat remote profile (ControlMaster connection reused, bundle cached);
  - a fresh `ssh host python script.py` doing the same work (a hand-written torch.profiler script
    copied over first), the baseline.
Run: .venv/bin/python bench/bench_remote.py [--quick]
``--quick``: short profiles (one warm-up step, two steps, two timed calls), to show the bench runs
to its end.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trnlens.jobs import ProfileRequest, run_profile  # noqa: E402
from trnlens.store import Store  # noqa: E402
from trnlens.targets.local import LocalTarget  # noqa: E402
from trnlens.targets.ssh import SshTarget, control_dir  # noqa: E402

from tests.conftest import python_without_trnlens  # noqa: E402
from tests.targets import sshd  # noqa: E402

MODEL = """
import torch


def inputs():
    return (torch.randn(4, 64, 256), torch.randn(256))


# trnlens: inputs=inputs
def naive(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
"""

SCRIPT = """
import sys
import torch
from torch.profiler import ProfilerActivity, profile, schedule
sys.path.insert(0, sys.argv[1])
import model

x, w = model.inputs()
with torch.inference_mode():
    for _ in range(3):
        model.naive(x, w)
    events = []
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=5),
                 on_trace_ready=lambda p: events.append(p.key_averages())) as prof:
        for _ in range(6):
            model.naive(x, w)
            prof.step()
print(events[0].table(row_limit=5))
"""


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    if os.geteuid() != 0 or not os.path.exists(sshd.SSHD):
        sys.exit("bench_remote needs root and openssh-server (scripts/setup.sh installs it)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
        host = sshd.start(tmp / "sshd")
        try:
            rows = measure(tmp, host, quick)
        finally:
            host.stop()
            subprocess.run(["pkill", "-f", str(control_dir())], capture_output=True)
    baseline = rows[-1][1]
    print("remote profile over ssh vs local vs a fresh `ssh host python script.py` (baseline)")
    print(f"  {'what':54s} {'seconds':>8s} {'vs baseline':>12s}")
    for label, seconds in rows:
        print(f"  {label:54s} {seconds:8.2f} {seconds / baseline:11.2f}x")


def measure(tmp: Path, host, quick: bool) -> list[tuple[str, float]]:
    root = tmp / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "model.py").write_text(textwrap.dedent(MODEL))
    python = python_without_trnlens(tmp / "remote-venv")
    request = ProfileRequest(
        variants=[{"path": str(root / "model.py"), "qualname": "naive"}], project_root=root,
        backend="cpu", warmup=1 if quick else 3, steps=2 if quick else 5,
        repeats=2 if quick else 20,
    )  # fmt: skip
    remote = SshTarget(name="bench", host=host.alias, ssh_args=host.ssh_args(),
                       python=str(python), workdir=str(tmp / "work"))  # fmt: skip

    def timed(target) -> float:
        started = time.perf_counter()
        with Store(root) as store:
            asyncio.run(run_profile(request, store, target))
        return time.perf_counter() - started

    rows = [("trnlens profile, local (cold agent)", timed(LocalTarget()))]
    rows.append(("trnlens profile, remote, first (new connection, upload)", timed(remote)))
    rows.append(("trnlens profile, remote, repeat (connection reused)", timed(remote)))
    remote_dir = tmp / "plain"
    subprocess.run(["ssh", *host.ssh_args(), "-o", "ControlPath=none", host.alias, "mkdir", "-p",
                    str(remote_dir)], check=True)  # fmt: skip
    (remote_dir / "model.py").write_text(textwrap.dedent(MODEL))
    (remote_dir / "script.py").write_text(textwrap.dedent(SCRIPT))
    started = time.perf_counter()
    subprocess.run(
        ["ssh", *host.ssh_args(), "-o", "ControlPath=none", host.alias, str(python),
         str(remote_dir / "script.py"), str(remote_dir)],
        check=True, capture_output=True,
    )  # fmt: skip
    rows.append(("fresh `ssh host python script.py` (baseline)", time.perf_counter() - started))
    return rows


if __name__ == "__main__":
    main()
