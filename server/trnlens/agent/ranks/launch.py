"""A multi-rank run: the agent starts N ranks under torchrun and merges what they measured.

torchrun (``python -m torch.distributed.run``, the launcher users already use) starts N
``worker`` processes with RANK/WORLD_SIZE/MASTER_ADDR set, rendezvous on 127.0.0.1. It stays
in the agent's process group (the server's kill of the agent's group reaches it) and stops every
rank as soon as one fails (``--max-restarts 0``, checked every 0.1 s). The ranks talk back through
files in the run's staging directory (worker.py says which), which also keeps each rank's
profile. Whatever happens here (a failure, a timeout, a cancel), ``_stop`` leaves no process.

Several hosts (the request's ``nodes``: how many, which this is, the first host's address and
port, the run id the server chose): one agent per host runs this with torchrun's static
rendezvous (``--nnodes M --node-rank i --master-addr --master-port``: a c10d TCPStore on the
first host, global ranks in host order, so host i holds ranks i*N .. i*N+N-1). Global rank 0
gathers every rank's outcome at the end, so the first host's agent merges all M x N ranks; the
others answer with their own ranks' merge (``node``), whose profiles the server collects into
the same run folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from .. import errors, loader
from ..protocol import Progress, parse_agent_message
from ..runner import new_run_id
from . import merge as rankmerge
from . import trace as ranktrace

if TYPE_CHECKING:  # (3.10's typing; the agent may meet an older python on a host)
    from typing import TypeGuard

MAX_RANKS = 64
_ADDRESS = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:_-]{0,252}")  # a name, IPv4 or IPv6, no option
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
STOP_GRACE_S = 10.0  # torchrun's SIGTERM to the ranks, then its SIGKILL, then ours


def nproc_of(request: dict) -> int:
    value = request.get("nproc_per_node", 1)
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_RANKS:
        raise errors.usage(
            f"nproc_per_node must be an integer from 1 to {MAX_RANKS}, got {value!r}"
        )
    return value


def nodes_of(request: dict) -> dict | None:
    """The request's ``nodes`` (several hosts), checked; None on one host."""
    nodes = request.get("nodes")
    if nodes is None:
        return None
    if not isinstance(nodes, dict):
        raise errors.usage(f"nodes must be an object, got {nodes!r}")
    count, rank, port = (nodes.get(k) for k in ("count", "rank", "master_port"))
    if not (_is_int(count) and _is_int(rank) and _is_int(port)):
        raise errors.usage(f"nodes.count, .rank and .master_port must be integers: {nodes!r}")
    if not 1 <= count <= MAX_RANKS or not 0 <= rank < count or not 0 < port < 65536:
        raise errors.usage(f"nodes out of range: {nodes!r}")
    addr, run_id = nodes.get("master_addr"), nodes.get("run_id")
    if not isinstance(addr, str) or not _ADDRESS.fullmatch(addr):
        raise errors.usage(f"nodes.master_addr must be a host name or address, got {addr!r}")
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise errors.usage(f"nodes.run_id must be a run id, got {run_id!r}")
    return nodes


def _is_int(value) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def run(request: dict, progress, cancelled) -> dict:
    nproc = nproc_of(request)
    nodes = nodes_of(request)
    node = nodes["rank"] if nodes else 0
    world = nproc * (nodes["count"] if nodes else 1)
    mine = list(range(node * nproc, node * nproc + nproc))  # this host's global ranks
    # the first host's rank 0 gathered every rank's outcome into its files
    expected = list(range(world)) if node == 0 else mine
    variants = request.get("variants") or []
    if len(variants) != 1:
        raise errors.usage("a multi-rank run profiles one function (no comparisons yet)")
    root = os.path.abspath(request.get("project_root") or os.getcwd())
    staging = request.get("artifacts_dir") or os.path.join(root, ".trnlens", "staging")
    run_id = nodes["run_id"] if nodes else new_run_id()
    work = os.path.join(staging, run_id)
    os.makedirs(work, exist_ok=True)
    # Shipped files (a remote run) are written once here, not by N ranks at the same time.
    loader.materialize(root, request.get("sources") or {}, prune=True)
    with open(os.path.join(work, "request.json"), "w", encoding="utf-8") as handle:
        json.dump({**request, "type": "profile", "sources": {}}, handle)
    where = f" on host {node + 1} of {nodes['count']}" if nodes else ""
    progress(Progress(None, "importing", 0, f"starting {nproc} ranks under torchrun{where}"))
    log_path = os.path.join(work, "torchrun.log")
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            _command(nproc, work, nodes), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            env=_environment(), cwd=root, preexec_fn=_die_with_parent,
        )  # fmt: skip
    try:
        code = _wait(proc, work, progress, cancelled)
    finally:
        _stop(proc, work, mine)
    launch_s = time.perf_counter() - started
    outcomes = _outcomes(work, expected)
    if code != 0 or any("error" in o for o in outcomes.values()) or len(outcomes) < len(expected):
        failure = _failure(outcomes, expected, work, log_path, root, code)
        shutil.rmtree(work, ignore_errors=True)  # a failed run keeps nothing
        failed_rank = getattr(failure, "extra", {}).get("rank")
        failed = outcomes.get(failed_rank) if isinstance(failed_rank, int) else None
        partial = (failed or {}).get("result")
        if failure.kind != "user_code" or partial is None:
            raise failure
        # The user's code failed on a rank: like a single-process run, the run is a result
        # with the error (the rank's own figures, none measured; the error names the rank).
        partial.update(run_id=run_id, error=failure.to_json(), world_size=world,
                       nproc_per_node=nproc, artifacts=[])  # fmt: skip
        for key in ("rank_timeline", "clock", "local_rank", "rank"):
            partial.pop(key, None)
        return partial
    _tidy(work)
    per_rank = [outcomes[r]["result"] for r in expected]
    result = rankmerge.merge(run_id, per_rank)
    if nodes:
        result["nodes"] = {"count": nodes["count"], "rank": node}
        result["nproc_per_node"] = nproc  # (the merge counts every rank as this host's)
    if node != 0:
        # The other hosts' part: their ranks' profiles, which the server brings into the run
        # folder; the first host's answer is the run.
        return result
    # (several hosts: the others' traces are not here yet; the server merges them once fetched)
    merged_trace, why_not = ranktrace.write(work, per_rank)
    if merged_trace is not None:
        result["artifacts"].insert(0, merged_trace)
    if why_not:
        result["warnings"].append(why_not)
    reading = [(r.get("rank_timeline") or {}).get("read_us") for r in per_rank]
    result["accounting"] = dict(result.get("accounting") or {}, launch_us=launch_s * 1e6,
                                collectives_read_us=reading)  # fmt: skip
    if result.get("compile") and not result.get("collectives"):
        result["warnings"].append(
            "compiled: no collective of the compiled graph was recognised (trnlens reads "
            "_c10d_functional launches and waits), so no rank's wait is known: busy time is the "
            "wall time and the slowest rank says little; profile without --compiled for each "
            "collective's time and wait"
        )
    if "OMP_NUM_THREADS" not in os.environ:
        result["warnings"].append(
            "torchrun ran each rank with OMP_NUM_THREADS=1 (its default when unset): compare "
            "per-rank times with a one-process run made at the same setting (set "
            "OMP_NUM_THREADS in the target's env to choose)"
        )
    return result


def _tidy(work: str) -> None:
    """Only the ranks' profiles stay with the run: the exchange files go."""
    for name in os.listdir(work):
        path = os.path.join(work, name)
        if name == "torchrun":
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.isfile(path) and not name.startswith("rank-"):
            os.remove(path)
        elif name.startswith("rank-") and name.endswith(".json"):
            os.remove(path)


def _command(nproc: int, work: str, nodes: dict | None = None) -> list[str]:
    package = __name__.rpartition(".")[0]
    if nodes:  # torchrun's static rendezvous: node ranks (and so global ranks) in host order
        where = [
            "--nnodes", str(nodes["count"]), "--node-rank", str(nodes["rank"]),
            "--master-addr", nodes["master_addr"], "--master-port", str(nodes["master_port"]),
        ]  # fmt: skip
    else:
        where = ["--nnodes", "1", "--master-addr", "127.0.0.1", "--master-port", str(_free_port())]
    return [
        sys.executable, "-m", "torch.distributed.run",
        *where, "--nproc-per-node", str(nproc),
        "--max-restarts", "0", "--monitor-interval", "0.1",
        "--log-dir", os.path.join(work, "torchrun"),  # not a torchelastic_* in $TMPDIR
        "-m", f"{package}.worker", work,
    ]  # fmt: skip


def _environment() -> dict:
    """The ranks import the agent from where this process did (the shipped zip, or the tree)."""
    package = __name__.rpartition(".")[0]
    here = os.path.abspath(__file__)
    for _ in range(package.count(".") + 2):
        here = os.path.dirname(here)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:  # in torchrun's process, before exec
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: torchrun stops its ranks
    except (OSError, AttributeError):
        pass


def _wait(proc, work: str, progress, cancelled) -> int:
    """Forwards rank 0's progress until torchrun ends; a cancel (or the interrupter's
    KeyboardInterrupt) leaves through ``run``'s ``finally``, which stops every rank."""
    progress_path = os.path.join(work, "progress.jsonl")
    offset = 0
    while True:
        try:
            code = proc.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            code = None
        offset = _forward(progress_path, offset, progress)
        if code is not None:
            return code
        if cancelled():
            from ..measure import Cancelled

            raise Cancelled()


def _forward(path: str, offset: int, progress) -> int:
    try:
        with open(path, encoding="utf-8") as handle:
            handle.seek(offset)
            for line in handle:
                if not line.endswith("\n"):
                    break
                offset += len(line.encode())
                state = parse_agent_message(line)
                if isinstance(state, Progress):
                    progress(replace(state, message=f"rank 0: {state.message}"))
    except FileNotFoundError:
        pass
    return offset


def _stop(proc, work: str, ranks: list[int]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # torchrun relays it to every rank
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for rank in ranks:  # a rank torchrun could not stop (or a torchrun killed hard)
        try:
            with open(os.path.join(work, f"pid-{rank}")) as handle:
                pid = int(handle.read().strip() or 0)
        except (OSError, ValueError):
            continue
        if pid and _is_ours(pid, work):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _is_ours(pid: int, work: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return work.encode() in handle.read()
    except OSError:
        return False


def _outcomes(work: str, ranks: list[int]) -> dict[int, dict]:
    found = {}
    for rank in ranks:
        try:
            with open(os.path.join(work, f"rank-{rank}.json"), encoding="utf-8") as handle:
                found[rank] = json.load(handle)
        except (OSError, ValueError):
            continue
    return found


def _failure(outcomes, ranks, work, log_path, root, code) -> errors.AgentError:
    """The error of the rank that failed first (a rank that raised before one that lost its
    peer in a collective), with what the other ranks were doing."""
    failed = [o["error"] for o in outcomes.values() if "error" in o]
    silent = [r for r in ranks if r not in outcomes]
    exits = _exit_codes(log_path)  # what torchrun reported of each failed rank
    # A rank that left no word is the cause when nothing else failed, or when it ended on its
    # own (an exit code, or a signal other than torchrun's SIGTERM/SIGKILL) and the others only
    # lost it in a collective. A rank torchrun stopped after another failed is not the cause.
    dead = [r for r in silent if exits.get(r) not in (None, "-15", "-9")]
    if silent and (not failed or (dead and all(e.get("collective") for e in failed))):
        failed.sort(key=lambda e: e.get("failed_at", 0))
        cause = dead[0] if dead else silent[0]
        exit_code = f" with exit code {exits[cause]}" if cause in exits else ""
        lost = ""
        if failed and failed[0].get("collective"):
            f = failed[0]
            lost = (f"; rank {f['rank']} then failed in {f['collective']['name']}: "
                    f"{f['message'].splitlines()[0][:200]}")  # fmt: skip
        return errors.environment(
            f"rank {cause} ended without a result{exit_code} (it crashed or exited){lost}; "
            f"torchrun's log:\n{_tail(log_path)}"
        )
    # A rank whose own code raised outside a collective is the cause; the others lost a peer.
    # (a rank that lost a peer on another host while gathering is not the cause either)
    failed.sort(
        key=lambda e: (e.get("collective") is not None or bool(e.get("lost_peer")),
                       e.get("failed_at", 0))
    )  # fmt: skip
    first = failed[0]
    rank = first["rank"]
    notes = []
    collective = first.get("collective")
    if collective:
        where = f" at {collective['path']}:{collective['line']}" if collective.get("path") else ""
        notes.append(
            f"rank {rank} was in {collective['name']}{where} for {collective['waited_s']:.1f} s "
            "when it failed (the collective timeout, or a peer gone)"
        )
    for other in ranks:
        if other == rank:
            continue
        site = _stuck_at(work, other, root)
        if site:
            notes.append(f"rank {other} was at {site} when it was stopped")
    message = f"rank {rank}: {first['message']}"
    if notes:
        message += " (" + "; ".join(notes) + ")"
    error = errors.AgentError(
        first.get("kind", "user_code"), message, type_=first.get("type"),
        path=first.get("path"), line=first.get("line"), traceback=first.get("traceback"),
    ).to_json()  # fmt: skip
    error["rank"] = rank
    if collective:
        error["collective"] = collective
    if first.get("lost_peer"):
        error["lost_peer"] = True
    return _Raised(error)


class _Raised(errors.AgentError):
    """An AgentError carrying a ready error dict (rank, collective) through main.py."""

    def __init__(self, error: dict):
        super().__init__(error["kind"], error["message"], type_=error.get("type"),
                         path=error.get("path"), line=error.get("line"),
                         traceback=error.get("traceback"))  # fmt: skip
        self.extra = {k: error[k] for k in ("rank", "collective", "lost_peer") if k in error}

    def to_json(self) -> dict:
        return {**super().to_json(), **self.extra}


def _stuck_at(work: str, rank: int, root: str) -> str | None:
    """The innermost project line in a stopped rank's stack dump (faulthandler: most recent
    call first, ``File "PATH", line N in FUNC``)."""
    try:
        with open(os.path.join(work, f"stack-{rank}.txt"), encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    prefix = root.rstrip(os.sep) + os.sep
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith('File "'):
            continue
        path, _, rest = line[len('File "') :].partition('"')
        if path.startswith(prefix) and ".trnlens" not in path and "site-packages" not in path:
            number = rest.split("line", 1)[-1].split()[0] if "line" in rest else "?"
            return f"{os.path.relpath(path, root)}:{number}"
    return None


def _exit_codes(log_path: str) -> dict[int, str]:
    """rank -> exit code, from the failure summary torchrun writes to its log (``rank : 1
    (local_rank: 1)`` then ``exitcode : 7 (pid: ...)``; -15 is its own SIGTERM)."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return {}
    codes: dict[int, str] = {}
    rank = None
    for line in lines:
        key, _, value = line.partition(":")
        words = value.split()
        if key.strip() == "rank" and words and words[0].isdigit():
            rank = int(words[0])
        elif key.strip() == "exitcode" and words and rank is not None:
            codes.setdefault(rank, words[0])
            rank = None
    return codes


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return ""
