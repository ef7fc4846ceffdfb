"""End to end: the disk and time under a real editor session (pytest-lsp), real files, real git.

Closed files written to disk get their analysis diagnostics (and lose them when deleted); a
``git checkout`` makes a closed file's runs stale within two seconds; a run made by the CLI in
another process appears in the open file's lens, with its change against the previous comparable
run; a regression is flagged only beyond the threshold and the runs' spread; a rename keeps the
function's history.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from lsprotocol import types
from trnlens import history
from trnlens.agent import sources

from ..test_store import fake_result
from .session import BARRIER_TIMEOUT_S as HANG_S
from .session import editor, workspace

NAIVE = textwrap.dedent("""
    import torch


    def rms(x, weight, eps=1e-6):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
""")


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return done.stdout.strip()


def init_repo(root: Path) -> None:
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "add", ".")
    git(root, "commit", "-qm", "one")


def hash_of(text: str, qualname: str) -> str:
    return sources.source_hash(text, sources.find_definition(text, qualname))


def store_in_another_process(root: Path, results: list[dict]) -> None:
    """Stores runs the way a CLI run or a sync does: another process, its own connection."""
    code = (
        "import json, sys\nfrom trnlens.store import Store\nwith Store(sys.argv[1]) as store:\n"
        "    for result in json.loads(sys.stdin.read()):\n        store.add(result)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(root)], input=json.dumps(results),
                   text=True, check=True)  # fmt: skip


def stored_run(i: int, path: str, qualname: str, text: str, **extra) -> dict:
    result = fake_result(i, path=path, qualname=qualname, **extra)
    result["function"]["source_hash"] = hash_of(text, qualname)
    return result


async def lens_title_with(ed, uri: str, qualname: str, part: str, timeout: float = 10) -> str:
    """The lens's title once it holds ``part`` (read again after each lens refresh the server
    sends), or the last title at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        seen = ed.refreshes["codeLens"]
        title = (await ed.lenses(uri))[qualname].command.title
        left = deadline - time.monotonic()
        if part in title or left <= 0:
            return title
        try:
            await ed.wait_for(lambda seen=seen: ed.refreshes["codeLens"] > seen, timeout=left)
        except TimeoutError:
            return (await ed.lenses(uri))[qualname].command.title


async def wait_watching(ed, name: str = "model.py", qualname: str = "rmsnorm_naive") -> None:
    async def watching():
        answer = await ed.command("trnlens.server.history", {"uri": ed.uri(name),
                                                             "qualname": qualname})  # fmt: skip
        return answer["watching"]

    deadline = time.monotonic() + 10
    while not await watching():
        assert time.monotonic() < deadline, "the server never started watching"
        await asyncio.sleep(0.1)
    await ed.watcher_settled()  # its watches are in place: a file written now is seen


async def test_a_closed_file_written_to_disk_gets_diagnostics_and_loses_them_when_deleted(
    tmp_path,
):
    root = workspace(tmp_path)
    async with editor(root) as ed:
        await wait_watching(ed)
        uri = ed.uri("norm.py")
        (root / "norm.py").write_text(NAIVE, "utf-8")  # never opened
        found = await ed.wait_for(lambda: ed.diagnostics(uri, "TRN001"), timeout=HANG_S,
                                  what="TRN001 on a closed file")  # fmt: skip
        assert found[0].range.start.line == NAIVE.splitlines().index(
            "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight"
        )
        # Files the repository ignores are not analysed.
        (root / ".gitignore").write_text("generated/\n")
        (root / "generated").mkdir()
        (root / "generated" / "norm.py").write_text(NAIVE, "utf-8")
        (root / "norm.py").unlink()
        await ed.wait_for(lambda: uri in ed.client.diagnostics and not ed.diagnostics(uri),
                          timeout=HANG_S, what="diagnostics cleared")  # fmt: skip
        assert not ed.diagnostics(ed.uri("generated/norm.py"))


async def test_git_checkout_makes_a_closed_files_results_stale(tmp_path):
    root = workspace(tmp_path)
    init_repo(root)
    v1 = (root / "model.py").read_text("utf-8")
    git(root, "checkout", "-qb", "other")
    v2 = v1.replace("squared + eps", "squared + 2 * eps")
    (root / "model.py").write_text(v2, "utf-8")
    git(root, "commit", "-qam", "two")
    git(root, "checkout", "-q", "main")
    store_in_another_process(root, [stored_run(1, "model.py", "rmsnorm_naive", v1),
                                    stored_run(2, "model.py", "rmsnorm_fused", v1)])  # fmt: skip
    async with editor(root) as ed:
        heard: list[tuple[float, dict]] = []
        ed.client.feature("trnlens/staleChanged")(
            lambda p: heard.append((time.monotonic(), {k: getattr(p, k) for k in p._fields}))
        )
        await wait_watching(ed)
        uri = ed.uri()
        before = await ed.command(
            "trnlens.server.history", {"uri": uri, "qualname": "rmsnorm_naive"}
        )
        assert before["stale"] is False
        git(root, "checkout", "-q", "other")
        await ed.wait_for(lambda: heard, timeout=HANG_S, what="staleChanged")
        _, params = heard[0]
        assert params["stale"] == ["rmsnorm_naive"] and params["fresh"] == ["rmsnorm_fused"]
        after = await ed.command(
            "trnlens.server.history", {"uri": uri, "qualname": "rmsnorm_naive"}
        )
        assert after["stale"] is True
        git(root, "checkout", "-q", "main")
        await ed.wait_for(lambda: len(heard) >= 2, timeout=HANG_S, what="fresh again")
        assert heard[1][1]["stale"] == []
        # Open documents follow the buffer: a checkout under an open file changes nothing.
        ed.open()
        git(root, "checkout", "-q", "other")
        await ed.watcher_settled()  # a barrier, not a sleep: the checkout has been handled
        assert "stale" not in (await ed.lenses(uri))["rmsnorm_naive"].command.title
        assert len(heard) == 2  # after one more round trip to the server


async def test_a_cli_run_in_another_process_appears_in_the_lens_with_its_history(tmp_path):
    root = workspace(tmp_path)
    async with editor(root) as ed:
        uri = ed.open()
        await wait_watching(ed)
        assert "·" not in (await ed.lenses(uri))["rmsnorm_fused"].command.title
        refreshes = ed.refreshes["codeLens"]
        done = subprocess.run(
            [sys.executable, "-m", "trnlens", "profile", "model.py::rmsnorm_fused", "--warmup",
             "1", "--steps", "2", "--repeats", "5", "--format", "json", "--quiet"],
            cwd=root, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        cli_run = json.loads(done.stdout)
        title = await ed.wait_for(
            lambda: ed.refreshes["codeLens"] > refreshes,
            timeout=HANG_S,
            what="a lens refresh",
        )
        title = (await ed.lenses(uri))["rmsnorm_fused"].command.title
        assert "dispatch" in title and "vs previous" not in title, title

        # A later comparable run slower by more than the threshold and the spread: a regression.
        # (Against a calm copy of the real run: on a busy machine the real one may say its timing
        # was unreliable, and a slowdown against it then reads "noisy", not "regression".)
        now = dt.datetime.now(dt.timezone.utc)
        calm = derived(cli_run, "calm", now + dt.timedelta(seconds=1), 1.0, spread=0.01)
        factor = 2.0
        slow = derived(calm, "slow", now + dt.timedelta(seconds=2), factor, spread=0.01)
        slower = history.percent(factor - 1)
        store_in_another_process(root, [calm, slow])
        text = (root / "model.py").read_text("utf-8")
        def_line = text.splitlines().index("def rmsnorm_fused(x, weight, eps=1e-6):")
        found = await ed.wait_for(lambda: ed.diagnostics(uri, "regression"), timeout=HANG_S,
                                  what="a regression diagnostic")  # fmt: skip
        assert found[0].severity == types.DiagnosticSeverity.Warning
        assert found[0].range.start.line == def_line
        assert f"{slower} slower than the previous comparable run" in found[0].message
        title = (await ed.lenses(uri))["rmsnorm_fused"].command.title
        assert f"{slower} vs previous (regression)" in title, title

        # Then a noisy pair: +30 %, the new run's spread as wide as its median: no regression,
        # and no "no change" either: its timing is unreliable, and the lens says why.
        noisy = derived(slow, "noisy", now + dt.timedelta(seconds=3), 1.3, spread=1.0)
        store_in_another_process(root, [noisy])
        await ed.wait_for(lambda: not ed.diagnostics(uri, "regression"), timeout=HANG_S,
                          what="the regression taken back")  # fmt: skip
        # the history is worked out off the server's loop: the lens is refreshed when it is ready
        wanted = "+30% vs previous (unreliable: its timing spread widely)"
        title = await lens_title_with(ed, uri, "rmsnorm_fused", wanted)
        assert wanted in title, title
        # The history command lists all three, newest first.
        answer = await ed.command(
            "trnlens.server.history", {"uri": uri, "qualname": "rmsnorm_fused"}
        )
        newest_first = [noisy, slow, calm, cli_run]
        assert [r["run_id"] for r in answer["runs"]] == [r["run_id"] for r in newest_first]


def derived(run: dict, tag: str, when: dt.datetime, factor: float, spread: float) -> dict:
    """A later run of the same function: the median times ``factor``, the min-max range
    ``spread`` times the new median wide."""
    result = json.loads(json.dumps(run))
    result["run_id"] = f"{run['run_id']}-{tag}"
    result["created_at"] = when.isoformat(timespec="seconds")
    median = run["timing"]["median_us"] * factor
    half = median * spread / 2
    result["timing"] = {**run["timing"], "median_us": median, "min_us": median - half,
                        "max_us": median + half}  # fmt: skip
    result["artifacts"] = []
    # A stand-in for a run on a quiet machine: the real run's busy-machine warning is not its.
    result["warnings"] = [w for w in run["warnings"] if not w.startswith("the machine is busy")]
    return result


async def test_a_rename_keeps_the_history(tmp_path):
    root = workspace(tmp_path)
    (root / "old.py").write_text(NAIVE, "utf-8")
    init_repo(root)
    store_in_another_process(root, [stored_run(1, "old.py", "rms", NAIVE)])
    git(root, "mv", "old.py", "new.py")
    git(root, "commit", "-qm", "move")
    async with editor(root) as ed:
        uri = ed.open("new.py")
        answer = await ed.command("trnlens.server.history", {"uri": uri, "qualname": "rms"})
        assert answer["aliases"] == ["new.py::rms", "old.py::rms"]
        assert [r["identity"] for r in answer["runs"]] == ["old.py::rms"]
        assert answer["stale"] is False  # the same source, at its new path
