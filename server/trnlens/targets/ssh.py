"""A remote target reached with the system OpenSSH client (the user's ssh config just works).

Nothing is installed on the host. The agent bundle goes once into ``<workdir>/agents/``; each run
gets ``<workdir>/runs/<id>/`` with the project files it needs (``src/``) and the agent's
``artifacts/``, fetched back into the local store and removed. Connections are reused
(ControlMaster under a private directory), so a repeat profile pays no handshake. Host key
checking is never turned off, and ``BatchMode`` makes a missing key fail at once instead of
waiting for a password nobody can type.

Every remote command is an argv list, quoted with ``shlex.quote`` into the one string ssh sends
to the remote shell; compound commands are constant ``sh -c`` scripts taking user-derived values
as positional parameters. No user input is ever pasted into shell syntax.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from trnlens.outcome import Outcome, runs
from trnlens.targets import bundle
from trnlens.targets.base import Staged, TargetError, redact
from trnlens.targets.bundle import short_temp_dir
from trnlens.targets.project_files import needed_files

# $$ is the shell sshd started for this session (a session leader, so its PID is the process
# group of everything the agent starts): it records it, then becomes the agent with exec.
LAUNCH = 'cd -- "$1" || exit 97; echo $$ > "$2"; shift 2; exec "$@"'
KILL = (
    'p=$(cat -- "$1" 2>/dev/null) && [ -n "$p" ] && kill -KILL -- "-$p" 2>/dev/null; rm -f -- "$1"'
)
# Each answer is marked: a login that prints a banner (.bashrc, motd) puts lines before it.
PREPARE = (
    'mkdir -p -- "$1/agents" "$1/runs" && cd -- "$1" && printf "TRNLENS-WORKDIR:%s\\n" "$(pwd)" && '
    '{ command -v -- "$2" >/dev/null || echo "NO-PYTHON"; } && '
    '{ [ -f "agents/$3" ] || echo "NO-BUNDLE"; }'
)
UPLOAD = 'cat > "$1.part.$$" && mv -f -- "$1.part.$$" "$1"'
# the host's python binds port 0 and prints what it got (no python, no run anyway)
FREE_PORT = "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"
UNPACK = 'mkdir -p -- "$1/src" "$1/artifacts" && tar -xzf - -C "$1/src"'
FETCH = (
    'cd -- "$1/artifacts" && printf "%s\\n" "$2" && tar -czf - .; status=$?; '
    'cd / && rm -rf -- "$1"; exit $status'
)
MASTER_EXIT_WAIT_S = 5.0  # how long close_masters waits for the masters to take their sockets
ARCHIVE_MARK = b"TRNLENS-ARCHIVE-FOLLOWS"  # what a login banner printed ends before it
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The run's artifacts (tar.gz) by the run directory, over the agent's connection; None: not so.
Fetch = Callable[[str], Awaitable[bytes | None]]


def quote_command(argv: list[str]) -> str:
    return " ".join(shlex.quote(str(a)) for a in argv)


def control_dir() -> Path:
    """A private directory for ControlMaster sockets (they grant a live login: ours alone)."""
    directory = bundle.cache_dir() / "ssh"
    if len(str(directory)) > 60:  # a unix socket path (+ 41 for %C) must stay under 108 bytes
        tag = hashlib.sha256(str(directory).encode()).hexdigest()[:8]
        directory = short_temp_dir() / f"trnlens-ssh-{os.getuid()}-{tag}"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    if directory.stat().st_uid != os.getuid():
        raise TargetError(f"{directory} belongs to another user: refusing to keep sockets there")
    os.chmod(directory, 0o700)
    return directory


def close_masters(directory: Path | None = None) -> int:
    """Ends every shared connection whose socket is in the control directory, then removes the
    directory when it is empty (each master removes its own socket as it leaves). Called when
    the language server exits; a CLI run keeps its master for ControlPersist to serve the next
    call. Returns how many masters were told to leave."""
    directory = directory or control_dir()
    told = 0
    for socket_path in sorted(_sockets(directory)):
        # With an explicit ControlPath (no %C to expand) ssh neither resolves nor contacts the
        # host: the argument only fills the command line.
        try:
            subprocess.run(
                ["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "trnlens-master"],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=MASTER_EXIT_WAIT_S,
                check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            continue  # no ssh client, or something that is not a master answers there: left be
        told += 1
    # `ssh -O exit` returns once the master has agreed to go, before it stops listening: wait
    # for that. A socket nobody listens on any more is stale (its master was killed, or is on its
    # way out): removed here, or the directory would stay behind.
    deadline = time.monotonic() + MASTER_EXIT_WAIT_S
    while told and time.monotonic() < deadline and any(map(_listening, _sockets(directory))):
        time.sleep(0.05)
    for socket_path in _sockets(directory):
        if not _listening(socket_path):
            socket_path.unlink(missing_ok=True)
    release_control_dir(directory)
    return told


def _sockets(directory: Path) -> list[Path]:
    return [p for p in directory.glob("*") if p.is_socket()] if directory.is_dir() else []


def _listening(socket_path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(socket_path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def release_control_dir(directory: Path | None = None) -> None:
    """Removes the control directory when no socket is left in it."""
    try:
        (directory or control_dir()).rmdir()
    except OSError:
        pass  # a master still listens there (or it is already gone)


@dataclass
class SshTarget:
    name: str
    host: str
    ssh_args: list[str] = field(default_factory=list, repr=False)  # may hold secrets
    python: str = "python3"
    workdir: str = ".cache/trnlens"  # relative to the remote home unless absolute
    backend: str = "auto"
    env: dict[str, str] = field(default_factory=dict, repr=False)  # may hold secrets
    remote_root: str | None = None
    connect_timeout_s: int = 15
    nproc_per_node: int | None = None  # ranks per run under torchrun (docs/ranks.md)
    address: str | None = None  # where other hosts reach this one; default: the host's name
    _workdir_abs: str | None = field(default=None, init=False, repr=False)
    _pidfile: str | None = field(default=None, init=False, repr=False)
    _bundle_name: str = field(default="", init=False, repr=False)  # the agent's, from prepare()

    def __post_init__(self) -> None:
        if not self.host or self.host.startswith("-") or any(c.isspace() for c in self.host):
            raise TargetError(f"target {self.name!r}: {self.host!r} is not a host ssh accepts")
        for key in self.env:
            if not _ENV_NAME.match(key):
                raise TargetError(f"target {self.name!r}: {key!r} is not an environment name")

    def describe(self) -> str:
        return f"{self.name} ({self.host})"

    def secrets(self) -> list[str]:
        """What never goes into a message: env values and every ``-o`` option's value."""
        found = list(self.env.values())
        args = self.ssh_args
        for i, arg in enumerate(args):
            option = None
            if arg == "-o" and i + 1 < len(args):
                option = args[i + 1]
            elif arg.startswith("-o") and len(arg) > 2:
                option = arg[2:]
            if option:
                name, sep, value = option.partition("=")
                value = value if sep else name.partition(" ")[2]
                found.append(value)
                # and each `--flag=value` inside it (a ProxyCommand's --token=...), which a
                # failing command may print on its own
                found += [word.partition("=")[2] for word in value.split() if "=" in word]
        return [value.strip() for value in found if value.strip()]

    # -- ssh plumbing
    def ssh(self, remote_argv: list[str]) -> list[str]:
        return [
            "ssh",
            *self.ssh_args,
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={self.connect_timeout_s}",
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={control_dir()}/%C",
            "-o", "ControlPersist=600",
            "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=3",
            "-e", "none",
            self.host,
            "--",
            quote_command(remote_argv),
        ]  # fmt: skip

    async def run(
        self, remote_argv: list[str], stdin: bytes | None = None, timeout: float = 120
    ) -> tuple[int, bytes, bytes]:
        proc = await asyncio.create_subprocess_exec(
            *self.ssh(remote_argv),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            proc.kill()
            await proc.wait()
            raise
        return await proc.wait(), out, err  # already exited: wait() only hands back its code

    async def checked(self, remote_argv: list[str], what: str, **kwargs) -> bytes:
        try:
            code, out, err = await self.run(remote_argv, **kwargs)
        except asyncio.TimeoutError:
            raise TargetError(f"{self.describe()}: {what} timed out") from None
        if code != 0:
            raise TargetError(self.explain(code, err.decode("utf-8", "replace"), what))
        return out

    def explain(self, code: int, stderr: str, what: str = "the agent") -> str:
        """A sentence for a failed ssh command: what went wrong and what to do about it."""
        return redact(self._explain(code, stderr, what), self.secrets())

    def _explain(self, code: int, stderr: str, what: str) -> str:
        text = stderr.strip()
        last = text.splitlines()[-1] if text else f"exit code {code}"
        if (
            "REMOTE HOST IDENTIFICATION HAS CHANGED" in text
            or "Host key verification failed" in text
        ):
            return (
                f"the host key of {self.host} does not match your known_hosts: trnlens never "
                "turns off host key checking. If the change is expected, remove the old key "
                f"(ssh-keygen -R {self.host}) and connect once with ssh to accept the new one"
            )
        if "Permission denied" in text:
            return (
                f"{self.host} refused authentication ({last}): check that `ssh {self.host}` "
                "logs in without a password prompt (key, agent, or the target's ssh_args)"
            )
        if code == 255:
            return f"cannot reach {self.host} over ssh: {last}"
        return f"{what} failed on {self.host}: {last}"

    # -- the agent's life
    async def prepare(self) -> None:
        """Creates the work directory, checks the interpreter, uploads the agent when missing."""
        # off the loop: it hashes every agent source and zips them when they changed
        local = await asyncio.to_thread(bundle.build)
        self._bundle_name = local.name
        out = await self.checked(
            ["sh", "-c", PREPARE, "sh", self.workdir, self.python, local.name],
            "preparing the work directory",
        )
        lines = out.decode("utf-8", "replace").splitlines()
        marked = [line for line in lines if line.startswith("TRNLENS-WORKDIR:")]
        if not marked:
            raise TargetError(
                f"{self.host} did not say where its work directory is: {out[-200:]!r}"
            )
        self._workdir_abs = marked[-1].removeprefix("TRNLENS-WORKDIR:")
        if "NO-PYTHON" in lines:
            raise TargetError(
                f"{self.python!r} was not found on {self.host}: set `python` for target "
                f"{self.name!r} to an interpreter that has torch"
            )
        if "NO-BUNDLE" in lines:
            await self.checked(
                ["sh", "-c", UPLOAD, "sh", f"{self._workdir_abs}/agents/{local.name}"],
                "uploading the agent", stdin=local.read_bytes(),
            )  # fmt: skip
        self._pidfile = f"{self._workdir_abs}/agents/{uuid.uuid4().hex}.pid"

    def command(self) -> list[str]:
        if self._workdir_abs is None or self._pidfile is None:
            raise TargetError("prepare() the target before starting its agent")
        assignments = self._assignments()
        agent = f"{self._workdir_abs}/agents/{self._bundle_name}"
        return self.ssh(
            ["sh", "-c", LAUNCH, "sh", self._workdir_abs, self._pidfile,
             "env", *assignments, self.python, agent, "--stop-on-eof"]
        )  # fmt: skip

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    async def kill(self) -> None:
        """Kills the agent's process group on the host (cancel, timeout): no orphans."""
        if self._pidfile:
            try:
                await self.run(["sh", "-c", KILL, "sh", self._pidfile], timeout=15)
            except (asyncio.TimeoutError, OSError):
                pass  # unreachable now: the agent stops itself when its stdin closes

    async def probe(self) -> dict:
        """What the host has (python, torch, torch_neuronx, devices, neuron-explorer)."""
        await self.prepare()
        agent = f"{self._workdir_abs}/agents/{self._bundle_name}"
        out = await self.checked(["env", *self._assignments(), self.python, agent, "--probe"],
                                 "probing the host")  # fmt: skip
        return last_json(out)

    def reach(self) -> str:
        """The address other hosts reach this one at (a multi-host run's rendezvous): the
        ``address`` field, else the ssh host without its user (an ssh config alias resolves
        only here: set ``address`` then)."""
        return self.address or self.host.rpartition("@")[2]

    async def free_port(self) -> int:
        """A TCP port free on the host now (the rendezvous port of a multi-host run)."""
        if self._workdir_abs is None:
            await self.prepare()
        out = await self.checked(
            [self.python, "-c", FREE_PORT], "finding a free port for the rendezvous"
        )
        try:
            return int(out.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise TargetError(f"{self.host} named no free port: {out[-200:]!r}") from None

    def _assignments(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.env.items()]

    # -- one run's files
    async def stage(self, payload: dict, store) -> Staged:
        if self._workdir_abs is None:
            await self.prepare()
        local_root = Path(payload["project_root"])
        buffers = {(local_root / p).resolve(): t for p, t in payload.get("files", {}).items()}
        entries = [(local_root / v["path"]).resolve() for v in payload["variants"]]
        files = needed_files(local_root, entries, buffers)
        run_dir = f"{self._workdir_abs}/runs/{uuid.uuid4().hex}"
        warnings: list[str] = []
        sources: dict[str, str] = {}
        if self.remote_root:
            src = self.remote_root
            await self.checked(["mkdir", "-p", "--", f"{run_dir}/artifacts"], "creating the run")
            warnings = await self._compare_remote_root(src, local_root, files, buffers)
        else:
            # One source tree per local project (not per run): unchanged modules stay loaded in
            # the warm agent between runs. Runs on one target are serialised by the caller.
            tag = hashlib.sha256(str(local_root).encode()).hexdigest()[:12]
            src = f"{self._workdir_abs}/projects/{tag}/src"
            shipped = _as_text(local_root, files, buffers)
            if shipped is not None:
                sources = shipped  # inside the request: no extra round trip
            else:  # a file that is not UTF-8 text: ship an archive
                src = f"{run_dir}/src"
                archive = _tar_gz(local_root, files, buffers)
                await self.checked(
                    ["sh", "-c", UNPACK, "sh", run_dir], "uploading the sources", stdin=archive
                )
        options = dict(payload.get("options") or {})
        # One NEFF cache per host, not per run: a repeat profile skips the Neuron compiles.
        options.setdefault("neff_cache_dir", f"{self._workdir_abs}/neff-cache")
        # The library files the run executes get digests: the server asks for those it lacks.
        options.setdefault("library_digests", True)
        # and the artifacts follow the result on the agent's connection (agent/artifacts/)
        options["artifacts_back"] = run_dir
        staged_payload = {
            **payload,
            "sources": sources,
            "project_root": src,
            "artifacts_dir": f"{run_dir}/artifacts",
            "options": options,
        }
        return Staged(
            staged_payload,
            run_dir=run_dir,
            extras={"local_root": str(local_root), "remote_src": src, "warnings": warnings},
        )

    async def _compare_remote_root(self, remote_root: str, local_root, files, buffers) -> list[str]:
        relative = [str(f.relative_to(local_root)) for f in files]
        out = await self.checked(
            ["sh", "-c", 'cd -- "$1" && shift && sha256sum -- "$@" 2>/dev/null; true', "sh",
             remote_root, *relative],
            "hashing remote_root",
        )  # fmt: skip
        remote = {}
        for line in out.decode("utf-8", "replace").splitlines():
            digest, _, name = line.partition("  ")
            remote[name] = digest
        differing = []
        for path, rel in zip(files, relative, strict=True):
            data = buffers[path].encode() if path in buffers else path.read_bytes()
            if remote.get(rel) != hashlib.sha256(data).hexdigest():
                differing.append(rel)
        if not differing:
            return []
        listed = ", ".join(differing[:8]) + (" ..." if len(differing) > 8 else "")
        return [
            f"remote_root {remote_root} on {self.host} differs from your files: {listed} "
            "(the remote copy ran)"
        ]

    async def collect(self, staged: Staged, outcome: Outcome, store, fetch: Fetch | None = None):
        """Brings the artifacts back and removes the run's directory on the host: as the agent
        sent them after its result (``fetch``: no round trip), else in one ssh command (a new
        client on the shared connection, a shell, tar); discard() is then a no-op."""
        if staged.run_dir is None:
            raise TargetError("the run's directory on the host is gone: run the profile again")
        data = await fetch(staged.run_dir) if fetch is not None else None
        if data is None:
            data = await self.checked(
                ["sh", "-c", FETCH, "sh", staged.run_dir, ARCHIVE_MARK.decode()],
                "fetching artifacts",
            )
            _, mark, data = data.partition(ARCHIVE_MARK + b"\n")
            if not mark:
                staged.run_dir = None
                raise TargetError(
                    "the artifacts arrived incomplete (no archive): run the profile again"
                )
        staged.run_dir = None
        _extract(data, Path(store.staging_dir()))
        local_root, remote_src = staged.extras["local_root"], staged.extras["remote_src"]
        for run in (found.data for found in runs(outcome)):
            run["warnings"].extend(staged.extras["warnings"])
            error = run.get("error")
            if error and error.get("traceback"):
                error["traceback"] = error["traceback"].replace(remote_src, local_root)

    async def discard(self, staged: Staged) -> None:
        if staged.run_dir:
            try:
                await self.run(["rm", "-rf", "--", staged.run_dir], timeout=60)
            except (asyncio.TimeoutError, OSError):
                pass

    def close_master(self) -> None:
        """Ends this host's shared connection (the language server leaves)."""
        command = ["ssh", *self.ssh_args, "-o", f"ControlPath={control_dir()}/%C",
                   "-O", "exit", self.host]  # fmt: skip
        try:
            subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            pass
        release_control_dir()


def _as_text(root: Path, files: list[Path], buffers: dict[Path, str]) -> dict[str, str] | None:
    shipped = {}
    for path in files:
        if path in buffers:
            text = buffers[path]
        else:
            try:
                text = path.read_text("utf-8")
            except UnicodeDecodeError:
                return None
        shipped[path.relative_to(root).as_posix()] = text
    return shipped


def _tar_gz(root: Path, files: list[Path], buffers: dict[Path, str]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for path in files:
            data = buffers[path].encode("utf-8") if path in buffers else path.read_bytes()
            info = tarfile.TarInfo(path.relative_to(root).as_posix())
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), compresslevel=5)


def last_json(out: bytes) -> dict:
    """The last line of ``out`` that is a JSON object (a login banner may come first)."""
    for line in reversed(out.decode("utf-8", "replace").splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    raise TargetError(f"the host's answer held no JSON: {out[-200:]!r}")


def _extract(data: bytes, destination: Path) -> None:
    """Unpacks a fetched artifact archive, refusing anything that would land outside it.

    Into a private folder first, moved in only once the whole archive read: a download cut
    short leaves no half-written files in the store."""
    destination = destination.resolve()
    unpacked = Path(tempfile.mkdtemp(prefix=".fetch-", dir=destination))
    try:
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
                members = []
                for member in archive.getmembers():
                    target = (unpacked / member.name).resolve()
                    if not target.is_relative_to(unpacked) or not (
                        member.isfile() or member.isdir()
                    ):
                        raise TargetError(f"refusing artifact entry {member.name!r}")
                    members.append(member)
                if hasattr(tarfile, "data_filter"):
                    archive.extractall(unpacked, members=members, filter="data")
                else:  # Python < 3.10.12 has no extraction filters: the checks above stand alone
                    archive.extractall(unpacked, members=members)
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            raise TargetError(
                f"the artifacts arrived incomplete ({exc}): the connection dropped while they "
                "were fetched; run the profile again"
            ) from None
        for entry in unpacked.iterdir():
            final = destination / entry.name
            if final.is_dir() and entry.is_dir():  # a run's folder the agent already started
                for child in entry.iterdir():
                    os.replace(child, final / child.name)
            else:
                os.replace(entry, final)
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)
