"""A warm agent kept alive between CLI calls: ``trnlens profile --warm [SECONDS]``.

The first call starts a small daemon (``python -m trnlens.warm``) that owns one warm agent for a
(project, target, interpreter) and listens on a private unix socket; later calls send their
request there and get progress and the result back, without paying for a new interpreter and
``import torch``. The daemon stores runs itself (the same store the CLI would use) and exits
after SECONDS without a request.

Protocol on the socket, one JSON object per line: the client sends ``{"request": {...}}``
(ProfileRequest's fields); the daemon answers with ``progress`` messages, then one ``result``
(``outcome``) or ``error`` (``error``, an agent error object).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from trnlens import outcome as outcomes
from trnlens.agent.protocol import Progress, progress_from_json, to_json
from trnlens.jobs import AgentFailure, AgentProcess, OnProgress, ProfileRequest, run_profile
from trnlens.outcome import Outcome
from trnlens.store import Store
from trnlens.targets import bundle, registry
from trnlens.targets.bundle import short_temp_dir

START_TIMEOUT_S = 30.0


def socket_dir() -> Path:
    directory = bundle.cache_dir() / "warm"
    if len(str(directory)) > 70:  # unix socket paths must stay under 108 bytes
        tag = hashlib.sha256(str(directory).encode()).hexdigest()[:8]
        directory = short_temp_dir() / f"trnlens-warm-{os.getuid()}-{tag}"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)  # whoever reaches the socket can run code as us
    return directory


def socket_path(root: Path, target: str, python: str | None) -> Path:
    key = json.dumps([str(Path(root).resolve()), target, python or sys.executable])
    return socket_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.sock"


def remove_socket(path: Path) -> None:
    """A daemon that leaves normally takes its socket, its log and (when empty) the socket
    directory with it: nothing of trnlens stays in the temporary directory."""
    path.unlink(missing_ok=True)
    path.with_suffix(".log").unlink(missing_ok=True)
    try:
        path.parent.rmdir()
    except OSError:
        pass  # another daemon's socket is still there


def _to_json(request: ProfileRequest) -> dict:
    fields = dataclasses.asdict(request)
    fields["project_root"] = str(request.project_root)
    return fields


async def run_warm(
    request: ProfileRequest,
    target: str,
    python: str | None,
    keep_s: float,
    on_progress: OnProgress | None = None,
) -> Outcome:
    """Runs the request on the warm daemon for this project and target, starting it if needed."""
    path = socket_path(request.project_root, target, python)
    try:
        reader, writer = await asyncio.open_unix_connection(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        if on_progress:
            on_progress(Progress(None, "starting", 0, f"a warm agent, kept {keep_s:g} s"))
        _spawn(path, request.project_root, target, python, keep_s)
        reader, writer = await _connect_when_up(path)
    writer.write((json.dumps({"request": _to_json(request)}) + "\n").encode())
    await writer.drain()
    try:
        while True:
            line = await reader.readline()
            if not line:
                raise AgentFailure({"kind": "internal", "type": "internal", "path": None,
                                    "line": None, "traceback": None,
                                    "message": "the warm agent daemon went away"})  # fmt: skip
            message = json.loads(line)
            if message["type"] == "progress" and on_progress:
                on_progress(progress_from_json(message))
            elif message["type"] == "result":
                return outcomes.parse(message["outcome"])
            elif message["type"] == "error":
                raise AgentFailure(message["error"])
    finally:
        writer.close()


def _spawn(path: Path, root: Path, target: str, python: str | None, keep_s: float) -> None:
    command = [sys.executable, "-m", "trnlens.warm", "--socket", str(path), "--project",
               str(root), "--target", target, "--keep", str(keep_s)]  # fmt: skip
    if python:
        command += ["--python", python]
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # a leaving daemon removes it
    with open(path.with_suffix(".log"), "ab") as log:  # the daemon keeps its own copy of the fd
        subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         start_new_session=True)  # fmt: skip


async def _connect_when_up(path: Path):
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            return await asyncio.open_unix_connection(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise AgentFailure({"kind": "environment", "type": "environment", "path": None,
                                    "line": None, "traceback": None,
                                    "message": f"the warm agent daemon did not start; see "
                                    f"{path.with_suffix('.log')}"}) from None  # fmt: skip
            await asyncio.sleep(0.05)


class Daemon:
    def __init__(self, path: Path, root: Path, target, keep_s: float):
        self.path, self.root, self.keep_s = path, root, keep_s
        self.target = target
        self.agent = AgentProcess(target, idle_timeout_s=None)  # the daemon's own timer rules
        self.lock = asyncio.Lock()
        self.last_used = time.monotonic()

    async def serve(self) -> None:
        old = os.umask(0o177)  # the socket: ours alone
        try:
            server = await asyncio.start_unix_server(self.handle, str(self.path))
        finally:
            os.umask(old)
        async with server:
            while time.monotonic() - self.last_used < self.keep_s or self.lock.locked():
                await asyncio.sleep(min(1.0, self.keep_s / 4 or 0.1))
        await self.agent.close()
        remove_socket(self.path)

    async def handle(self, reader, writer) -> None:
        def send(message: dict) -> None:
            writer.write((json.dumps(message) + "\n").encode())

        try:
            line = await reader.readline()
            fields = json.loads(line)["request"]
            fields["project_root"] = Path(fields["project_root"])
            request = ProfileRequest(**fields)
            async with self.lock:
                try:
                    with Store(request.project_root) as store:
                        outcome = await run_profile(
                            request, store, self.target, on_progress=lambda m: send(to_json(m)),
                            agent=self.agent,
                        )  # fmt: skip
                    send({"type": "result", "outcome": outcome.data})
                except AgentFailure as failure:
                    send({"type": "error", "error": failure.error})
                finally:
                    self.last_used = time.monotonic()
            await writer.drain()
        except (ConnectionError, ValueError, KeyError, TypeError):
            pass  # a client that went away or spoke nonsense: nothing to answer
        finally:
            writer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trnlens.warm")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--target", default="local")
    parser.add_argument("--python")
    parser.add_argument("--keep", type=float, default=600.0)
    args = parser.parse_args(argv)
    root = Path(args.project)
    target = registry.resolve(args.target, root, python=args.python)
    path = Path(args.socket)
    path.unlink(missing_ok=True)
    asyncio.run(Daemon(path, root, target, args.keep).serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
