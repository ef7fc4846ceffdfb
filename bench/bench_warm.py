"""Benchmark: a warm repeat profile against a cold one and a hand-written torch.profiler script.

For a small function (RMSNorm on (4, 64, 256)), measured in one run, on the local CPU target and
on a remote target over a test SSH server (started here; needs root and openssh-server):
  - cold: a new agent process (torch imported) and one profile;
  - warm repeat: the same agent again (median of 5);
  - the hand-written script (`python script.py`, fresh interpreter; over a fresh ssh remotely);
  - ratios (goal: the warm repeat at least 5x faster than the script) and trnlens's overhead
    beyond the profiled steps (the request's wall time minus the time spent in the user's
    code in every pass, from the result's accounting; goal: under 150 ms).
Run: .venv/bin/python bench/bench_warm.py [--quick]
``--quick``: short profiles (one warm-up step, two steps, two timed calls), 2 warm repeats, to
show the bench runs to its end: there the remote part is required (without root and
openssh-server it fails, where the full bench prints the local table only).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trnlens import jobs  # noqa: E402
from trnlens.jobs import AgentProcess, ProfileRequest, run_profile  # noqa: E402
from trnlens.store import Store  # noqa: E402
from trnlens.targets.local import LocalTarget  # noqa: E402
from trnlens.targets.ssh import SshTarget, control_dir  # noqa: E402

from bench.bench_remote import MODEL, SCRIPT  # noqa: E402
from tests.conftest import python_without_trnlens  # noqa: E402
from tests.targets import sshd  # noqa: E402

REPEATS = 5


class Phases:
    """Where a warm repeat's time goes on the server's side: each step of ``jobs`` timed by
    wrapping it (the request's time in the agent less its profiled steps is the agent's own)."""

    WRAPPED = (
        (jobs.ProfileRequest, "payload", "payload (git commit)"),
        (SshTarget, "stage", "stage (project files)"),
        (AgentProcess, "request", "agent request (less steps)"),
        (SshTarget, "collect", "collect (artifacts over ssh)"),
        (jobs, "fetch_library_texts", "library texts by digest"),
        (jobs.library_texts, "attach", "static rules on library files"),
        (jobs.summary, "attach", "device summary"),
        (jobs, "_store_outcome", "store (sqlite, artifacts)"),
    )

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {label: [] for *_, label in self.WRAPPED}
        self.saved = []

    def __enter__(self) -> Phases:
        for owner, name, label in self.WRAPPED:
            original = getattr(owner, name)
            self.saved.append((owner, name, original))
            setattr(owner, name, self._timed(original, label))
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)

    def _timed(self, original, label):
        times = self.times[label]

        if asyncio.iscoroutinefunction(original):

            async def timed(*args, **kwargs):
                started = time.perf_counter()
                try:
                    return await original(*args, **kwargs)
                finally:
                    times.append(time.perf_counter() - started)

            return timed

        def timed_sync(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                times.append(time.perf_counter() - started)

        return timed_sync

    def reset(self) -> None:
        for times in self.times.values():
            times.clear()


async def profile_times(root: Path, target, repeats: int, quick: bool) -> dict:
    request = ProfileRequest(
        variants=[{"path": str(root / "model.py"), "qualname": "naive"}], project_root=root,
        backend="cpu", warmup=1 if quick else 3, steps=2 if quick else 5,
        repeats=2 if quick else 20,
    )  # fmt: skip
    agent = AgentProcess(target)
    with Store(root) as store:
        started = time.perf_counter()
        await run_profile(request, store, target, agent=agent)
        cold = time.perf_counter() - started
        warm, overhead, steps = [], [], []
        with Phases() as phases:
            for _ in range(repeats):
                started = time.perf_counter()
                result = (await run_profile(request, store, target, agent=agent)).data
                elapsed = time.perf_counter() - started
                warm.append(elapsed)
                steps.append(result["accounting"]["steps_us"] / 1e6)
                overhead.append(elapsed - steps[-1])
    await agent.close()
    breakdown = {k: statistics.median(v) for k, v in phases.times.items() if v}
    if "agent request (less steps)" in breakdown:
        breakdown["agent request (less steps)"] -= statistics.median(steps)
    return {
        "cold": cold, "warm": statistics.median(warm), "overhead": statistics.median(overhead),
        "breakdown": breakdown, "repeats": repeats,
    }  # fmt: skip


def script_time(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def table(title: str, times: dict, script: float) -> None:
    print(title)
    warm = f"warm repeat (median of {times['repeats']})"
    rows = [
        ("cold profile (new agent)", times["cold"], f"{script / times['cold']:.2f}x"),
        (warm, times["warm"], f"{script / times['warm']:.2f}x"),
        ("hand-written torch.profiler script (baseline)", script, "1.00x"),
    ]
    print(f"  {'what':48s} {'seconds':>8s} {'script / this':>14s}")
    for label, seconds, ratio in rows:
        print(f"  {label:48s} {seconds:8.3f} {ratio:>14s}")
    goal = "met" if script / times["warm"] >= 5 else "NOT met"
    print(f"  warm repeat vs script: {script / times['warm']:.1f}x faster (goal >= 5x: {goal})")
    met = "met" if times["overhead"] < 0.150 else "NOT met"
    print(f"  overhead beyond the profiled steps: {times['overhead'] * 1000:.0f} ms "
          f"(goal < 150 ms: {met})")  # fmt: skip
    print("  where it goes (median ms of the warm repeats):")
    for label, seconds in times["breakdown"].items():
        print(f"    {label:44s} {seconds * 1000:8.1f}")


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    repeats = 2 if quick else REPEATS
    remote_here = os.geteuid() == 0 and os.path.exists(sshd.SSHD)
    if quick and not remote_here:  # every part runs in quick mode, or the bench fails
        sys.exit("bench_warm --quick: the remote part needs root and openssh-server")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
        root = tmp / "project"
        root.mkdir()
        (root / "pyproject.toml").write_text("")
        (root / "model.py").write_text(textwrap.dedent(MODEL))
        (root / "script.py").write_text(textwrap.dedent(SCRIPT))
        local = asyncio.run(profile_times(root, LocalTarget(), repeats, quick))
        script = script_time([sys.executable, str(root / "script.py"), str(root)])
        table("local CPU target, RMSNorm (4, 64, 256)", local, script)
        if not remote_here:
            print("remote: skipped (needs root and openssh-server)")
            return
        host = sshd.start(tmp / "sshd")
        try:
            python = python_without_trnlens(tmp / "remote-venv")
            remote = SshTarget(name="bench", host=host.alias, ssh_args=host.ssh_args(),
                               python=str(python), workdir=str(tmp / "work"))  # fmt: skip
            times = asyncio.run(profile_times(root, remote, repeats, quick))
            ssh = ["ssh", *host.ssh_args(), "-o", "ControlPath=none", host.alias]
            script = script_time([*ssh, str(python), str(root / "script.py"), str(root)])
            print()
            table("remote target over ssh (test server on 127.0.0.1)", times, script)
        finally:
            host.stop()
            subprocess.run(["pkill", "-f", str(control_dir())], capture_output=True)


if __name__ == "__main__":
    main()
