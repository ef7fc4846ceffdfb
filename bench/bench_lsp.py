"""Latency of the language server's hot requests, idle and while a profile runs, and its memory.

Generates a 2,000-line model file (nn.Module classes, methods, functions) in a temporary project,
starts ``trnlens serve`` over stdio with a real LSP client, profiles one function so that lenses,
hints and hovers have figures to render, then times ``textDocument/codeLens``,
``textDocument/inlayHint`` (whole file) and ``textDocument/hover`` (on random lines), answers
kept as JSON as an editor's client keeps them: first idle, then while a second, CPU-heavy
profile runs in the agent. A lens with figures is resolved (``codeLens/resolve``) as an editor
does for the lenses on screen (one per request: the profiled function's). Does all of this for
trnlens as it was at ``--against REV`` (default: the merge base with main, extracted from git)
and for this tree, in one run, and prints one table with p50/p95 per request, phase and version,
the lens counts and the server's resident memory.

Loop lag: the project is a git repository with ``--commits`` commits (10,000 by default, written
with ``git fast-import`` in a second or two), the model file renamed halfway, so that a lens's
history (``git log --follow``) walks all of them. The server runs under ``loop_probe.py``, a
heartbeat on its event loop every 5 ms; the table gives how late the beats ran (p50, p99, max)
and how many were over 20 ms (the goal: none), per phase: opening the file and its first
lenses, the first run and its placement, the idle requests, typing (20 one-line edits, each
followed by a lens request), and the requests while the second profile runs.

    python bench/bench_lsp.py [--samples 200] [--lines 2000] [--commits 10000] [--against REV]

``--quick``: every phase once on a 200-line file, 3 samples, 4 commits, 2 placements, 2 edits and a
light second profile, against HEAD (a fresh clone may have no branch to take a merge base with),
to show the bench runs to its end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from lsprotocol import types
from pygls.protocol import JsonRPCProtocol
from pytest_lsp.client import make_test_lsp_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_check import default_against, extract  # noqa: E402

HEADER = """import torch
from torch import nn


def small_inputs():
    return (torch.randn(64, 256), torch.randn(256))


# trnlens: inputs=small_inputs
def rmsnorm_naive(x, weight, eps=1e-6):
    squared = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(squared + eps) * weight


def busy_inputs():
    return (torch.randn(512, 512),)


# trnlens: inputs=busy_inputs
def busy(x):
    for _ in range({busy}):
        x = torch.tanh(x @ x)
    return x

"""

BLOCK = """
class Block{n}(nn.Module):
    def __init__(self, dim=256):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        y = self.norm(x)
        y = self.proj(y)
        return torch.relu(y) + x

    def extra_repr(self):
        return "block {n}"


def helper_{n}(x, scale=2.0):
    y = x * scale
    return y.sum(-1)
"""


def model_source(lines: int, busy: int = 60) -> str:
    """A model file of about ``lines`` lines whose ``busy`` runs ``busy`` matmuls."""
    parts = [HEADER.format(busy=busy)]
    n = 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(BLOCK.format(n=n))
        n += 1
    return "".join(parts)


STALL_S = 0.020  # the goal: no beat of the loop later than this
CALLBACK_S = 0.050  # the goal: no callback on the loop over this much CPU (issue 30)
PROBE = Path(__file__).resolve().parent / "loop_probe.py"


def git_history(root: Path, text: str, commits: int) -> float:
    """Makes ``root`` a git repository of ``commits`` commits in which ``model.py`` (``text``)
    was ``old_model.py`` for the first half; returns the seconds it took."""
    started = time.perf_counter()
    data = text.encode()
    stream: list[bytes] = []
    for i in range(commits):
        message = f"commit {i}\n".encode()
        note = f"{i}\n".encode()
        stream.append(b"commit refs/heads/main\n")
        when = 1_700_000_000 + i
        stream.append(f"mark :{i + 1}\ncommitter B <b@example.com> {when} +0000\n".encode())
        stream.append(b"data %d\n%s" % (len(message), message))
        if i:
            stream.append(f"from :{i}\n".encode())
        if i == 0:
            stream.append(b"M 100644 inline old_model.py\ndata %d\n%s\n" % (len(data), data))
        if i == commits // 2:
            stream.append(b"R old_model.py model.py\n")
        stream.append(b"M 100644 inline notes.txt\ndata %d\n%s\n" % (len(note), note))
    git = ["git", "-C", str(root), "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "fast-import", "--quiet"], input=b"".join(stream), check=True)
    subprocess.run([*git, "checkout", "-q", "-f", "main"], check=True)
    return time.perf_counter() - started


Beat = tuple[float, float, float, float]  # time, lag, loop CPU since the last, longest callback


def lag_stats(beats: list[Beat], windows: list[tuple[float, float]]) -> dict:
    inside = [(lag, cpu, one) for t, lag, cpu, one in beats if any(a <= t <= b for a, b in windows)]
    if not inside:
        return {"beats": 0}
    lags = [lag for lag, _, _ in inside]
    return {
        "beats": len(lags), "p50": percentile(lags, 0.5), "p99": percentile(lags, 0.99),
        "max": max(lags), "stalls": sum(lag > STALL_S for lag in lags),
        # late beats with more than 20 ms of the loop thread's CPU behind them: work on the loop
        "busy": sum(lag > STALL_S and cpu > STALL_S for lag, cpu, _ in inside),
        "max_cpu": max(cpu for _, cpu, _ in inside),
        "max_callback": max(one for _, _, one in inside),
    }  # fmt: skip


def read_beats(path: Path) -> list[Beat]:
    beats = []
    for line in path.read_text().splitlines():
        if not line.startswith("block "):
            t, lag, cpu, one = line.split()
            beats.append((float(t), float(lag), float(cpu), float(one)))
    return beats


def read_blocks(path: Path) -> list[tuple[float, float, str]]:
    """(time, seconds, what) of each blocking call made on the loop's thread."""
    found = []
    for line in path.read_text().splitlines():
        if line.startswith("block "):
            _, t, seconds, what = line.split(" ", 3)
            found.append((float(t), float(seconds), what))
    return found


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Bench:
    def __init__(self, root: Path, text: str, env: dict[str, str], lag_file: Path):
        self.lag_file = lag_file
        self.root = root
        self.env = env
        self.text = text
        self.uri = (root / "model.py").as_uri()
        self.client = make_test_lsp_client()
        self.lines = text.count("\n")
        self.version = 1

    async def start(self) -> None:
        server = [sys.executable, str(PROBE), str(self.lag_file), "serve"]
        await self.client.start_io(*server, cwd=str(self.root), env=self.env)
        caps = types.ClientCapabilities(
            window=types.WindowClientCapabilities(work_done_progress=True)
        )
        await self.client.initialize_session(
            types.InitializeParams(
                capabilities=caps,
                root_uri=self.root.as_uri(),
                initialization_options={"warmup": 1, "steps": 2, "repeats": 3},
            )
        )
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(self.uri, "python", 1, self.text)
            )
        )

    @property
    def pid(self) -> int:
        return self.client._server.pid

    async def profile(self, qualname: str) -> str:
        answer = await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="trnlens.server.profile",
                arguments=[{"uri": self.uri, "qualname": qualname}],
            )
        )
        return answer["token"]

    def ended(self, token: str) -> bool:
        reports = self.client.progress_reports.get(token, [])
        return bool(reports) and isinstance(reports[-1], types.WorkDoneProgressEnd)

    async def wait_end(self, token: str) -> None:
        while not self.ended(token):
            await asyncio.sleep(0.05)

    async def raw(self, method: str, params: object) -> object:
        """A request whose answer stays JSON, as an editor's client keeps it: pygls's client would
        otherwise turn every lens into lsprotocol objects, a cost of this Python client that is
        no part of the server's latency (and grows with the lens count)."""
        protocol = self.client.protocol
        msg_id = str(uuid.uuid4())
        future = JsonRPCProtocol.send_request(protocol, method, params, msg_id=msg_id)
        protocol._result_types.pop(msg_id, None)  # no response type: the result is not structured
        return await asyncio.wrap_future(future)

    async def time_requests(self, samples: int) -> dict[str, list[float]]:
        doc = types.TextDocumentIdentifier(self.uri)
        whole = types.Range(types.Position(0, 0), types.Position(self.lines, 0))
        timings: dict[str, list[float]] = {"codeLens": [], "inlayHint": [], "hover": []}
        structure = self.client.protocol._converter.structure
        rng = random.Random(0)
        for _ in range(samples):
            start = time.perf_counter()
            found = await self.raw("textDocument/codeLens", types.CodeLensParams(doc))
            listed = time.perf_counter()
            unresolved = [lens for lens in found or [] if not lens.get("command")]
            if unresolved:  # the editor resolves the lenses on screen: here the profiled one
                await self.raw("codeLens/resolve", structure(unresolved[0], types.CodeLens))
                timings.setdefault("(of which resolve)", []).append(time.perf_counter() - listed)
            timings["codeLens"].append(time.perf_counter() - start)
            start = time.perf_counter()
            await self.raw("textDocument/inlayHint", types.InlayHintParams(doc, whole))
            timings["inlayHint"].append(time.perf_counter() - start)
            position = types.Position(rng.randrange(self.lines), 8)
            start = time.perf_counter()
            await self.raw("textDocument/hover", types.HoverParams(doc, position))
            timings["hover"].append(time.perf_counter() - start)
        return timings

    async def type_lines(self, edits: int) -> None:
        """Typing: ``edits`` comment lines inserted over the file (incremental changes), each
        followed by a ``textDocument/codeLens`` as an editor asks after a change, 30 ms apart."""
        doc = types.TextDocumentIdentifier(self.uri)
        for i in range(edits):
            at = types.Position((i * 7919) % self.lines, 0)
            self.version += 1
            self.client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    types.VersionedTextDocumentIdentifier(self.version, self.uri),
                    [types.TextDocumentContentChangePartial(types.Range(at, at), "# typed\n")],
                )
            )
            self.lines += 1
            await self.raw("textDocument/codeLens", types.CodeLensParams(doc))
            await asyncio.sleep(0.03)

    async def lens_count(self) -> int:
        params = types.CodeLensParams(types.TextDocumentIdentifier(self.uri))
        return len(await self.raw("textDocument/codeLens", params))

    async def stop(self) -> None:
        await self.client.shutdown_session()
        await self.client.stop()


async def measure(text: str, samples: int, env: dict[str, str], commits: int, rounds: int) -> dict:
    """One server's figures; ``rounds``: the lens requests after each run and the edits typed."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        root.mkdir()
        (root / "pyproject.toml").write_text('[project]\nname = "bench"\n')
        (root / "model.py").write_text(text)
        built = git_history(root, text, commits) if commits else 0.0
        bench = Bench(root, text, env, Path(tmp) / "lag.txt")
        windows: dict[str, list[tuple[float, float]]] = {}
        start = time.monotonic()
        await bench.start()
        rss = {"started": rss_mb(bench.pid)}
        lenses = await bench.lens_count()
        windows["open, first lenses"] = [(start, time.monotonic())]
        start = time.monotonic()
        await bench.wait_end(await bench.profile("rmsnorm_naive"))  # figures to render
        for _ in range(rounds):  # the editor resolves the new lens (its history: git log --follow)
            await bench.time_requests(1)
            await asyncio.sleep(0.05)
        windows["first run, placed"] = [(start, time.monotonic())]
        rss["after a run"] = rss_mb(bench.pid)

        start = time.monotonic()
        idle = await bench.time_requests(samples)
        windows["idle requests"] = [(start, time.monotonic())]
        start = time.monotonic()
        await bench.type_lines(rounds)
        windows["typing, lenses"] = [(start, time.monotonic())]
        token = await bench.profile("busy")
        while not any(
            getattr(r, "message", "") and r.message.startswith(("warm-up", "measuring"))
            for r in bench.client.progress_reports.get(token, [])
        ):
            await asyncio.sleep(0.05)
        start = time.monotonic()
        busy = await bench.time_requests(samples)
        overlapped = not bench.ended(token)  # the whole busy sample ran during the profile
        rss["during a run"] = rss_mb(bench.pid)
        await bench.wait_end(token)
        for _ in range(rounds):  # and the second run's lens
            await bench.time_requests(1)
        windows["profiling + lenses"] = [(start, time.monotonic())]
        await bench.stop()
        beats = read_beats(bench.lag_file)
        blocks = read_blocks(bench.lag_file)
    lag = {name: lag_stats(beats, spans) for name, spans in windows.items()}
    for name, spans in windows.items():
        inside = [s for t, s, _ in blocks if any(a <= t <= b for a, b in spans)]
        lag[name].update(blocked=len(inside), blocked_s=sum(inside),
                         blocked_max=max(inside, default=0.0))  # fmt: skip
    lag["whole session"] = lag_stats(beats, [(beats[0][0], beats[-1][0])] if beats else [])
    lag["whole session"].update(
        blocked=len(blocks), blocked_s=sum(s for _, s, _ in blocks),
        blocked_max=max((s for _, s, _ in blocks), default=0.0),
    )  # fmt: skip
    kinds: dict[str, int] = {}
    for _, _, what in blocks:
        kinds[what[:90]] = kinds.get(what[:90], 0) + 1
    return {"idle": idle, "busy": busy, "rss": rss, "lenses": lenses, "overlapped": overlapped,
            "lag": lag, "git_s": built, "blocking": kinds}  # fmt: skip


class Replies:
    """The in-process server's writer: keeps what it sends (no client, no pipe)."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def write(self, data: bytes) -> None:
        self.sent.append(json.loads(data))

    def close(self) -> None:
        pass


def initialize_in_process(protocol: JsonRPCProtocol, root: Path) -> None:
    """The ``initialize`` request an editor sends first, handled by the server's own message
    path: pygls makes the workspace (its folders, which opening a document reads) only then."""
    replies = Replies()
    protocol.set_writer(replies, include_headers=False)
    params = {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {},
              "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}]}  # fmt: skip
    request = {"jsonrpc": "2.0", "id": 0, "method": types.INITIALIZE, "params": params}
    protocol.handle_message(protocol.structure_message(request))  # a synchronous handler
    answer = next((r for r in replies.sent if r.get("id") == 0), None)
    if answer is None or "error" in answer:
        raise RuntimeError(f"the in-process server did not initialize: {answer}")


async def in_process(text: str, samples: int) -> list[float]:
    """This tree's codeLens handler and the answer's serialisation, in this process: the server's
    own share of the round trip (the rest is the pipe, the event loops and the client)."""
    from trnlens.lsp.server import create_server

    server = create_server()
    with tempfile.TemporaryDirectory() as tmp:
        initialize_in_process(server.protocol, Path(tmp))
        path = Path(tmp) / "model.py"
        path.write_text(text)
        doc = server.services.ctx.open_document(path.as_uri(), text)
        handler = server.protocol.fm.features[types.TEXT_DOCUMENT_CODE_LENS]
        params = types.CodeLensParams(types.TextDocumentIdentifier(doc.uri))
        unstructure = server.protocol._converter.unstructure
        timings = []
        for i in range(samples + 1):
            start = time.perf_counter()
            result = await handler(params)  # an async handler: it waits for the document's parse
            json.dumps(unstructure(types.CodeLensResponse(id=i, result=result)))
            timings.append(time.perf_counter() - start)
    return timings[1:]  # the first builds the cache


async def main(samples: int, lines: int, against: str, commits: int, quick: bool) -> None:
    text = model_source(lines, busy=2 if quick else 60)
    rounds = 2 if quick else 20
    with tempfile.TemporaryDirectory() as tmp:
        before_env = {**os.environ, "PYTHONPATH": str(extract(against, Path(tmp)))}
        load = os.getloadavg()[0]
        before = await measure(text, samples, before_env, commits, rounds)
        after = await measure(text, samples, dict(os.environ), commits, rounds)
        load = max(load, os.getloadavg()[0])
    print(
        f"trnlens language server, {text.count(chr(10))}-line model file, {samples} samples; "
        f"before = {against[:10]}, after = this tree; load {load:.1f} on {os.cpu_count()} cores"
    )
    print(f"codeLens lenses: before {before['lenses']}, after {after['lenses']}")
    print(
        f"{'request':<12} {'phase':<16} {'before p50':>10} {'before p95':>10} "
        f"{'after p50':>9} {'after p95':>9} {'p95 after/before':>16}"
    )
    for phase, label in (("idle", "idle"), ("busy", "profile running")):
        for name in dict.fromkeys([*before[phase], *after[phase]]):
            b, a = before[phase].get(name), after[phase].get(name)
            cells = []
            for values in (b, a):
                for q in (0.5, 0.95):
                    cells.append(f"{percentile(values, q) * 1000:.2f}" if values else "-")
            ratio = f"{percentile(a, 0.95) / percentile(b, 0.95):.2f}" if a and b else "-"
            print(
                f"{name:<12} {label:<16} {cells[0]:>10} {cells[1]:>10} {cells[2]:>9} "
                f"{cells[3]:>9} {ratio:>16}"
            )
    own = await in_process(text, samples)
    print(
        f"codeLens handler + serialisation in process (after, no run placed): p50 "
        f"{statistics.median(own) * 1000:.2f} ms, p95 {percentile(own, 0.95) * 1000:.2f} ms"
    )
    print(
        f"\nevent-loop lag (a 5 ms heartbeat's lateness), repository of {commits} commits "
        f"(built by git fast-import in {after['git_s']:.1f} s); goal: no beat over "
        f"{STALL_S * 1000:.0f} ms. Wall-clock figures: a loaded machine delays beats too (load "
        f"above), so compare before and after of the same run. 'of them busy': late beats with "
        f"over 20 ms of the loop thread's CPU behind them (work on the loop, not the machine); "
        f"'max CPU': the most loop-thread CPU between two beats (counted from the loop's start, "
        f"not the process's: see loop_probe.py); 'max cb ms': the most CPU one callback took "
        f"(the tests' loop guard fails a test over {CALLBACK_S * 1000:.0f} ms; load-independent); "
        f"'blocking calls': subprocess waits, fsyncs and sleeps made on the loop's thread "
        f"(count, their total and longest time: load-independent in count)"
    )
    print(
        f"{'phase':<20} {'version':<7} {'beats':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>8} "
        f"{'>20 ms':>7} {'of them busy':>12} {'max CPU ms':>10} {'max cb ms':>9} "
        f"{'blocking calls':>15} {'total ms':>9} {'max ms':>7}"
    )
    for phase in after["lag"]:
        for version, found in (("before", before), ("after", after)):
            s = found["lag"].get(phase, {"beats": 0})
            if not s["beats"]:
                print(f"{phase:<20} {version:<7} {0:>6}")
                continue
            print(
                f"{phase:<20} {version:<7} {s['beats']:>6} {s['p50'] * 1000:>7.2f} "
                f"{s['p99'] * 1000:>7.2f} {s['max'] * 1000:>8.1f} {s['stalls']:>7} "
                f"{s['busy']:>12} {s['max_cpu'] * 1000:>10.1f} {s['max_callback'] * 1000:>9.1f} "
                f"{s['blocked']:>15} {s['blocked_s'] * 1000:>9.1f} {s['blocked_max'] * 1000:>7.1f}"
            )
    opened = [found["lag"]["open, first lenses"] for found in (before, after)]
    if all(s["beats"] for s in opened):
        worst = [s["max_callback"] * 1000 for s in opened]
        met = "met" if worst[1] < CALLBACK_S * 1000 else "NOT met"
        print(
            f"open, first lenses: the longest callback on the loop, before {worst[0]:.1f} ms "
            f"of CPU, after {worst[1]:.1f} ms (goal under {CALLBACK_S * 1000:.0f} ms: {met})"
        )
    for version, found in (("before", before), ("after", after)):
        calls = ", ".join(f"{n}x {what}" for what, n in found["blocking"].items()) or "none"
        print(f"blocking calls on the loop, {version}: {calls}")
    for version, found in (("before", before), ("after", after)):
        if not found["overlapped"]:
            print(f"({version}: the profile ended before the last busy sample: raise busy's loop)")
        rss = ", ".join(f"{k} {v:.0f} MB" for k, v in found["rss"].items())
        print(f"server RSS {version}: {rss}")


if __name__ == "__main__":
    quick = "--quick" in sys.argv[1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every phase once, tiny sizes")
    parser.add_argument("--samples", type=int, default=3 if quick else 200)
    parser.add_argument("--lines", type=int, default=200 if quick else 2000)
    parser.add_argument("--commits", type=int, default=4 if quick else 10_000,
                        help="git history of the project")  # fmt: skip
    parser.add_argument("--against", default=None, help="git revision of the 'before' figures")
    args = parser.parse_args()
    against = args.against or default_against(quick)
    asyncio.run(main(args.samples, args.lines, against, args.commits, quick))
