"""One rank of a multi-rank run: started by torchrun, as ``python -m <agent>.ranks.worker DIR``.

DIR (made by ``launch.py``) holds ``request.json``; this rank writes ``pid-R`` first, rank 0
appends its progress to ``progress.jsonl``, and each rank ends by writing ``rank-R.json``: its
result, or its error with the time it failed (the coordinator names the rank that failed first).
A rank's profile lands in ``DIR/rank-R/``. On several hosts (the request's ``nodes``) each rank
sends its outcome to global rank 0 (``gather_object`` on the run's gloo group), which writes the
other hosts' ``rank-R.json`` beside its own: the first host's agent merges every rank.

Nothing may outlive the run: this process asks the kernel for SIGKILL when its parent (torchrun)
dies, and a SIGTERM (torchrun stopping the ranks after one failed, or a cancel) first dumps the
Python stack to ``stack-R.txt``, so a rank stopped while stuck can be told where it was.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
import traceback

from .. import errors, loader
from ..collectives import wrapper as collectives
from ..protocol import Profile, Progress, format_message, parse_request


def _die_with_parent() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: torchrun's own SIGTERM still stops us
        pass
    if os.getppid() == 1:  # the parent died before the request took effect
        os._exit(1)


def _write(path: str, data: dict) -> None:
    temp = f"{path}.tmp"
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, default=str)
    os.replace(temp, path)  # the coordinator never reads half a file


def main(argv: list[str] | None = None) -> int:
    _die_with_parent()
    work = (sys.argv[1:] if argv is None else argv)[0]
    rank = int(os.environ.get("RANK", "0"))
    with open(os.path.join(work, "request.json"), encoding="utf-8") as handle:
        parsed = parse_request(handle.read())
    if not isinstance(parsed, Profile):
        raise SystemExit(f"rank {rank}: request.json holds a {parsed.type}, not a profile")
    request = parsed.fields
    with open(os.path.join(work, f"pid-{rank}"), "w") as handle:
        handle.write(str(os.getpid()))
    stack_file = open(os.path.join(work, f"stack-{rank}.txt"), "w")  # noqa: SIM115 (for life)
    # The dump runs in the signal handler itself (a rank blocked in a collective's C code gets
    # it too), then the default action ends the process.
    faulthandler.register(signal.SIGTERM, file=stack_file, all_threads=True, chain=True)
    progress_path = os.path.join(work, "progress.jsonl")

    def progress(state: Progress) -> None:
        if rank == 0:
            with open(progress_path, "a", encoding="utf-8") as handle:
                handle.write(format_message(state) + "\n")

    outcome, lockstep = _run(request, rank, work, progress)
    if request.get("nodes") and lockstep is not None and "error" not in outcome:
        # A rank that failed does not gather: it leaves, and the others lose it at once
        # (gloo sees the connection close) instead of waiting out the collective timeout.
        outcome = _gather(lockstep, outcome, rank, work)
    _write(os.path.join(work, f"rank-{rank}.json"), outcome)
    sys.stdout.flush()
    sys.stderr.flush()
    # No interpreter teardown: torch's took most of a second, and a peer may already be gone.
    os._exit(1 if "error" in outcome else 0)  # torchrun stops the others on a failure


def _gather(lockstep, outcome: dict, rank: int, work: str) -> dict:
    """Every rank's outcome to global rank 0, which writes those of the other hosts' ranks."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # the first host holds ranks 0..local-1
    try:
        gathered = lockstep.gather(outcome)
    except Exception as exc:  # a peer on another host failed or was stopped
        failure = errors.environment(
            f"trnlens rank {rank}: the ranks' results could not be gathered on rank 0 "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}): "
            "a rank on another host failed or was stopped"
        )
        return _failure({**failure.to_json(), "lost_peer": True}, rank)
    for other, theirs in enumerate(gathered or []):
        if other >= local:
            _write(os.path.join(work, f"rank-{other}.json"), theirs)
    return outcome


def _run(request: dict, rank: int, work: str, progress) -> tuple[dict, object]:
    from ..runner import Runner

    root = os.path.abspath(request.get("project_root") or os.getcwd())
    project = loader.Project(root=root, files={})
    lockstep = None
    try:
        import torch

        from .lockstep import Lockstep

        options = request.get("options") or {}
        if options.get("collectives", True):  # off only to measure its cost
            collectives.install(torch, project.is_project_file, project.relpath)
        lockstep = Lockstep.start(
            torch, request.get("backend") or "auto", float(options.get("collective_timeout_s", 300))
        )
        clock = lockstep.clock()
        node_name = (request.get("nodes") or {}).get("host")
        if isinstance(node_name, str) and node_name:  # the host as the user named it
            clock["host"] = node_name
        else:
            node_name = None
        rank_request = dict(request, out_dir=os.path.join(work, f"rank-{rank}"))
        if lockstep.dist_backend == "nccl" and not request.get("device"):
            rank_request["device"] = f"cuda:{os.environ.get('LOCAL_RANK', '0')}"
        result = Runner(rank_request, progress, lambda: False, lockstep=lockstep).run()
        if result.get("error"):  # the user's code failed on this rank: the run fails
            # The result goes along: a failed run is still a result (the editor shows it at
            # the raising line), as in a single process.
            return {**_failure(result["error"], rank), "result": result}, lockstep
        result["rank"] = rank
        if node_name:
            result["host"] = node_name
        result["local_rank"] = int(os.environ.get("LOCAL_RANK", rank))
        result["clock"] = clock
        result["dist_backend"] = lockstep.dist_backend
        return {"result": result}, lockstep
    except errors.AgentError as exc:
        return _failure(exc.to_json(), rank), lockstep
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        failure = errors.from_user_code(exc, project.is_project_file, project.relpath)
        if failure.path is None:
            failure = errors.AgentError(
                "internal", f"trnlens rank {rank}: {type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(),
            )  # fmt: skip
        return _failure(failure.to_json(), rank), lockstep


def _failure(error: dict, rank: int) -> dict:
    error = dict(error, rank=rank, failed_at=time.time())
    if collectives.last_failure is not None:
        name, path, line, seconds = collectives.last_failure
        error["collective"] = {"name": name, "path": path, "line": line, "waited_s": seconds}
    return {"error": error}


if __name__ == "__main__":
    raise SystemExit(main())
