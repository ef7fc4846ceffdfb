"""Latency of the language server's hot requests, idle and while a profile runs, and its memory.

Generates a 2,000-line model file (nn.Module classes, methods, functions) in a temporary project,
starts ``trnlens serve`` over stdio with a real LSP client, profiles one function so that lenses,
hints and hovers have figures to render, then times ``textDocument/codeLens``,
``textDocument/inlayHint`` (whole file) and ``textDocument/hover`` (on random lines):
first idle, then while a second, CPU-heavy profile runs in the agent. Prints one table with
p50/p95 per request and phase, and the server's resident memory (VmRSS).

    python bench/bench_lsp.py [--samples 200] [--lines 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pytest_lsp.client import make_test_lsp_client

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
    for _ in range(60):
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


def model_source(lines: int) -> str:
    parts = [HEADER]
    n = 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(BLOCK.format(n=n))
        n += 1
    return "".join(parts)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Bench:
    def __init__(self, root: Path, text: str):
        self.root = root
        self.text = text
        self.uri = (root / "model.py").as_uri()
        self.client = make_test_lsp_client()
        self.lines = text.count("\n")

    async def start(self) -> None:
        server = [sys.executable, "-m", "trnlens", "serve"]
        await self.client.start_io(*server, cwd=str(self.root))
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

    async def time_requests(self, samples: int) -> dict[str, list[float]]:
        doc = types.TextDocumentIdentifier(self.uri)
        whole = types.Range(types.Position(0, 0), types.Position(self.lines, 0))
        timings: dict[str, list[float]] = {"codeLens": [], "inlayHint": [], "hover": []}
        rng = random.Random(0)
        for _ in range(samples):
            start = time.perf_counter()
            await self.client.text_document_code_lens_async(types.CodeLensParams(doc))
            timings["codeLens"].append(time.perf_counter() - start)
            start = time.perf_counter()
            await self.client.text_document_inlay_hint_async(types.InlayHintParams(doc, whole))
            timings["inlayHint"].append(time.perf_counter() - start)
            position = types.Position(rng.randrange(self.lines), 8)
            start = time.perf_counter()
            await self.client.text_document_hover_async(types.HoverParams(doc, position))
            timings["hover"].append(time.perf_counter() - start)
        return timings

    async def stop(self) -> None:
        await self.client.shutdown_session()
        await self.client.stop()


async def main(samples: int, lines: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pyproject.toml").write_text('[project]\nname = "bench"\n')
        text = model_source(lines)
        (root / "model.py").write_text(text)
        bench = Bench(root, text)
        await bench.start()
        rss = {"started": rss_mb(bench.pid)}
        await bench.wait_end(await bench.profile("rmsnorm_naive"))  # figures to render
        rss["after a run"] = rss_mb(bench.pid)

        idle = await bench.time_requests(samples)
        token = await bench.profile("busy")
        while not any(
            getattr(r, "message", "") and r.message.startswith(("warm-up", "measuring"))
            for r in bench.client.progress_reports.get(token, [])
        ):
            await asyncio.sleep(0.05)
        busy = await bench.time_requests(samples)
        overlapped = not bench.ended(token)  # the whole busy sample ran during the profile
        rss["during a run"] = rss_mb(bench.pid)
        await bench.wait_end(token)
        await bench.stop()

    print(f"trnlens language server, {text.count(chr(10))}-line model file, {samples} samples")
    print(f"{'request':<12} {'phase':<16} {'p50 ms':>8} {'p95 ms':>8}")
    for phase, timings in (("idle", idle), ("profile running", busy)):
        for name, values in timings.items():
            p50 = statistics.median(values) * 1000
            p95 = percentile(values, 0.95) * 1000
            print(f"{name:<12} {phase:<16} {p50:>8.2f} {p95:>8.2f}")
    if not overlapped:
        print("(the profile ended before the last busy sample: raise busy()'s loop count)")
    print("server RSS: " + ", ".join(f"{k} {v:.0f} MB" for k, v in rss.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--lines", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(main(args.samples, args.lines))
