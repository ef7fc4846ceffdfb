"""Opens a run's profile (or the profile list) in Neuron Explorer on the run's target.

On the host: find ``neuron-explorer`` (on PATH or ``/opt/aws/neuron/bin``), start ``view``
detached when its ports do not answer, upload the run's profile from the local store (the remote
run directory is gone by then) and ingest it with ``view -d DIR --ingest-only --display-name``.
Then, for an SSH target, the tunnel (:mod:`trnlens.explorer.tunnel`); a local target (VS Code
Remote on the instance itself) needs none. Every host command is a constant ``sh -c`` script
with user-derived values as positional parameters, like the rest of the SSH target.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import re
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from trnlens.explorer import artifacts
from trnlens.explorer.tunnel import ExplorerError, Pool, Ports, answers
from trnlens.targets.local import LocalTarget
from trnlens.targets.ssh import SshTarget, TargetError

DEFAULT_BINARY = "/opt/aws/neuron/bin/neuron-explorer"
INSTALL = (
    "install the aws-neuronx-tools package from the AWS Neuron apt repository "
    "(sudo apt-get install aws-neuronx-tools; it provides " + DEFAULT_BINARY + ")"
)
FIND = (
    'for c in neuron-explorer "$1"; do p=$(command -v -- "$c") && { echo "$p"; exit 0; }; done; '
    "echo NO-EXPLORER"
)
START = (
    'mkdir -p -- "$1" && cd -- "$1" && '
    '{ setsid nohup "$2" view >explorer.log 2>&1 </dev/null & echo $! > explorer.pid; }'
)
LOG_TAIL = 'tail -n 5 -- "$1/explorer.log" 2>/dev/null; true'
UPLOAD = 'rm -rf -- "$1" && mkdir -p -- "$1" && tar -xzf - -C "$1" && cd -- "$1" && pwd'
RUN_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$")
PORTS = (
    "import socket, sys\n"
    "for p in sys.argv[1:]:\n"
    "    try:\n"
    "        socket.create_connection(('localhost', int(p)), timeout=2).close()\n"
    "        print(p)\n"
    "    except OSError:\n"
    "        pass\n"
)


class ExplorerMissing(ExplorerError):
    def __init__(self, message: str, downloads: list[Path]):
        super().__init__(message)
        self.downloads = downloads


@dataclass
class Opened:
    url: str
    api_url: str
    display_names: list[str] = field(default_factory=list)
    tunnel_reused: bool = False
    started: bool = False
    message: str = ""


class Host:
    """Runs the explorer's scripts on the target (over ssh, or here), with the target's env."""

    def __init__(self, target: LocalTarget | SshTarget, workdir: str):
        self.target = target
        self.remote = isinstance(target, SshTarget)
        self.workdir = workdir

    @property
    def where(self) -> str:
        return self.target.host if isinstance(self.target, SshTarget) else "this machine"

    async def run(
        self, argv: list[str], stdin: bytes | None = None, timeout: float = 120
    ) -> tuple[int, str, str]:
        assignments = [f"{k}={v}" for k, v in (self.target.env or {}).items()]
        argv = ["env", *assignments, *argv]
        target = self.target
        if isinstance(target, SshTarget):
            try:
                code, out, err = await target.run(argv, stdin=stdin, timeout=timeout)
            except asyncio.TimeoutError:
                raise ExplorerError(f"{self.where}: {argv[-1]!r} timed out") from None
            if code == 255:
                raise ExplorerError(target.explain(code, err.decode("utf-8", "replace")))
        else:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
            code = await proc.wait()  # already exited: wait() only hands back its code
        return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    async def sh(self, script: str, *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        return await self.run(["sh", "-c", script, "sh", *args], stdin=stdin)

    async def answering(self, ports: Ports) -> set[int]:
        python = self.target.python if self.remote else (self.target.python or sys.executable)
        code, out, _ = await self.run(
            [python or "python3", "-c", PORTS, str(ports.ui), str(ports.api)]
        )
        return {int(x) for x in out.split() if x.isdigit()}


async def find_binary(host: Host) -> str | None:
    code, out, err = await host.sh(FIND, DEFAULT_BINARY)
    lines = out.strip().splitlines()
    if code != 0 or not lines or lines[-1] == "NO-EXPLORER":
        return None
    return lines[-1]


async def ensure_running(host: Host, binary: str, ports: Ports, timeout: float = 30) -> bool:
    """Starts ``neuron-explorer view`` detached unless both ports answer; True when started."""
    if await host.answering(ports) == {ports.ui, ports.api}:
        return False
    code, _, err = await host.sh(START, host.workdir, binary)
    if code != 0:
        raise ExplorerError(f"starting neuron-explorer on {host.where} failed: {err.strip()}")
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if await host.answering(ports) == {ports.ui, ports.api}:
            return True
        await asyncio.sleep(0.3)
    _, log, _ = await host.sh(LOG_TAIL, host.workdir)
    raise ExplorerError(
        f"neuron-explorer view started on {host.where} but ports {ports.ui} (UI) and "
        f"{ports.api} (API) did not both answer within {timeout:.0f} s"
        + (f"; its log ends: {log.strip()}" if log.strip() else "")
    )


def _archive(run_dir: Path, profile: artifacts.Profile) -> bytes:
    raw = io.BytesIO()
    files = [p.neff for p in profile.pairs] + [n for p in profile.pairs for n in p.ntffs]
    files += profile.orphan_neffs + profile.orphan_ntffs + profile.runtime
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for f in files:
            info = tarfile.TarInfo(f.path.relative_to(run_dir).as_posix())
            info.size = f.size
            info.mode = 0o644
            with open(f.path, "rb") as data:
                archive.addfile(info, data)
    return gzip.compress(raw.getvalue(), compresslevel=5)


async def ingest(
    host: Host, binary: str, run_dir: Path, run_id: str, name: str
) -> tuple[list[str], str]:
    """Uploads (remote) and ingests the run's profile; returns display names and where it is."""
    if not RUN_ID.match(run_id):
        raise ExplorerError(f"{run_id!r} is not a run id")
    profile = artifacts.find(run_dir)
    if not profile.found:
        raise ExplorerError(f"run {run_id} has no Neuron profile (no NEFF/NTFF or runtime trace)")
    base = str(run_dir)
    if host.remote:
        code, out, err = await host.sh(
            UPLOAD, f"{host.workdir}/profiles/{run_id}", stdin=_archive(run_dir, profile)
        )
        if code != 0:
            raise ExplorerError(f"uploading the profile to {host.where} failed: {err.strip()}")
        base = out.strip().splitlines()[-1]
    jobs: list[tuple[str, list[str]]] = []
    systems = profile.system_dirs
    for i, directory in enumerate(systems):
        label = name if len(systems) == 1 else f"{name} ({directory.name or i})"
        rel = directory.relative_to(run_dir).as_posix()
        jobs.append((label, ["-d", f"{base}/{rel}"]))
    if not systems:  # a device-only profile: each NEFF with its first non-empty NTFF
        firsts = [(p, next((n for n in p.ntffs if not n.empty), None)) for p in profile.pairs]
        pairs = [(p, n) for p, n in firsts if n is not None]
        for i, (pair, ntff) in enumerate(pairs):
            label = name if len(pairs) == 1 else f"{name} #{i + 1}"
            neff = pair.neff.path.relative_to(run_dir).as_posix()
            trace = ntff.path.relative_to(run_dir).as_posix()
            jobs.append((label, ["-n", f"{base}/{neff}", "-s", f"{base}/{trace}"]))
    if not jobs:
        raise ExplorerError(
            f"run {run_id} has neither a system profile (trace_info.pb + ntrace.pb) nor a "
            "NEFF with a non-empty NTFF: nothing for Neuron Explorer to show"
        )
    names = []
    for label, source in jobs:
        code, out, err = await host.run(
            [binary, "view", *source, "--ingest-only", "--display-name", label], timeout=600
        )
        if code != 0:
            last = (err.strip() or out.strip() or f"exit code {code}").splitlines()[-1]
            raise ExplorerError(f"neuron-explorer could not ingest {label!r}: {last}")
        names.append(label)
    return names, base


async def open_explorer(
    target: LocalTarget | SshTarget,
    run: dict | None,
    run_dir: Path | None,
    pool: Pool | None,
    ports: Ports | None = None,
    local_workdir: Path | None = None,
) -> Opened:
    """Explorer serving ``run``'s profile (or its profile list) and a URL that works here."""
    ports = ports or Ports()
    if isinstance(target, SshTarget):
        workdir = f"{target.workdir}/explorer"
    else:
        workdir = str(local_workdir or Path.home() / ".cache" / "trnlens" / "explorer")
    host = Host(target, workdir)
    try:
        binary = await find_binary(host)
        if binary is None:
            downloads = artifacts.find(run_dir).downloads() if run_dir else []
            offer = (
                " Meanwhile, the run's NEFF/NTFF pairs to open elsewhere: "
                + ", ".join(str(p) for p in downloads)
                if downloads
                else ""
            )
            raise ExplorerMissing(
                f"neuron-explorer is not installed on {host.where} (neither on PATH nor "
                f"{DEFAULT_BINARY}): {INSTALL}.{offer}",
                downloads,
            )
        started = await ensure_running(host, binary, ports)
        names: list[str] = []
        if run is not None and run_dir is not None:
            qualname = (run.get("function") or {}).get("qualname", "run")
            name = f"{qualname} {run['run_id'][:8]}"
            names, _ = await ingest(host, binary, run_dir, run["run_id"], name)
    except TargetError as exc:
        raise ExplorerError(str(exc)) from None
    reused = False
    url, api_url = f"http://localhost:{ports.ui}/", f"http://localhost:{ports.api}/"
    if isinstance(target, SshTarget):
        if pool is None:
            pool = Pool()
        tunnel, reused = await pool.get(target, ports)
        url, api_url = tunnel.url, tunnel.api_url
    else:
        for each in (url, api_url):
            if not await asyncio.to_thread(answers, each, 3):
                raise ExplorerError(f"neuron-explorer on this machine does not answer at {each}")
    what = f"profile {', '.join(names)}" if names else "the profile list"
    via = f" through an SSH tunnel to {target.host}" if isinstance(target, SshTarget) else ""
    return Opened(url, api_url, names, reused, started, f"Neuron Explorer ({what}){via}: {url}")


def default_workdir(root: Path) -> Path:
    return Path(root) / ".trnlens" / "explorer"


__all__ = ["ExplorerError", "ExplorerMissing", "Opened", "Ports", "Pool", "open_explorer"]
