"""The language server under load: 50 files open, an edit every 50 ms, profiles running.

Starts ``trnlens serve`` with a real LSP client on a temporary project of ``--files`` model files
(bench_lsp's generator), measures the hot requests idle (the baseline), then for ``--seconds``
sends an incremental edit every ``--edit-ms`` (round robin over the files; each edit inserts a
line, the next removes it, so the text does not grow) while profiles run back to back and
lenses, hints and hovers are requested on random files. Prints p50/p95 per request, idle and
under load with their ratio, and the server's resident memory at the start of the load, half
way and at the end: the second half's growth against the first's tells whether memory grows
with the number of edits.

    python bench/bench_load.py [--files 50] [--seconds 60] [--edit-ms 50] [--lines 300]

``--quick``: 3 files of 100 lines, 2 seconds of load, 3 idle samples and a light profile, to show
the bench runs to its end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_lsp import Bench, model_source, percentile, rss_mb  # noqa: E402


class Load(Bench):
    """bench_lsp's client and server (under its loop probe, whose beats land in ``lag_file``),
    with every file open."""

    def __init__(self, root: Path, texts: dict[str, str], lag_file: Path):
        first = next(iter(texts))
        super().__init__(root, texts[first], dict(os.environ), lag_file)
        self.texts = texts
        self.uris = {name: (root / name).as_uri() for name in texts}
        self.versions = dict.fromkeys(texts, 1)
        self.edits = 0

    async def start(self) -> None:
        await super().start()
        for name, text in self.texts.items():
            if self.uris[name] == self.uri:
                continue
            self.client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    types.TextDocumentItem(self.uris[name], "python", 1, text)
                )
            )

    def edit(self, name: str, line: int, insert: bool) -> None:
        self.versions[name] += 1
        end = types.Position(line + (0 if insert else 1), 0)
        change = types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(line, 0), end),
            text=f"    # edit {self.edits}\n" if insert else "",
        )
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(self.versions[name], self.uris[name]),
                [change],
            )
        )
        self.edits += 1

    async def one_of_each(self, rng: random.Random, timings: dict[str, list[float]]) -> None:
        name = rng.choice(list(self.texts))
        doc = types.TextDocumentIdentifier(self.uris[name])
        lines = self.texts[name].count("\n")
        requests = {
            "codeLens": self.client.text_document_code_lens_async(types.CodeLensParams(doc)),
            "inlayHint": self.client.text_document_inlay_hint_async(
                types.InlayHintParams(
                    doc, types.Range(types.Position(0, 0), types.Position(lines, 0))
                )
            ),
            "hover": self.client.text_document_hover_async(
                types.HoverParams(doc, types.Position(rng.randrange(lines), 8))
            ),
        }
        for kind, request in requests.items():
            start = time.perf_counter()
            await request
            timings[kind].append(time.perf_counter() - start)


def empty() -> dict[str, list[float]]:
    return {"codeLens": [], "inlayHint": [], "hover": []}


async def main(files: int, seconds: float, edit_ms: float, lines: int, quick: bool) -> None:
    rng = random.Random(13)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        root.mkdir()
        (root / "pyproject.toml").write_text('[project]\nname = "bench"\n')
        texts = {}
        for i in range(files):
            texts[f"model_{i:02d}.py"] = model_source(lines, busy=2 if quick else 60)
            (root / f"model_{i:02d}.py").write_text(texts[f"model_{i:02d}.py"])
        load = Load(root, texts, Path(tmp) / "lag.txt")
        await load.start()
        await load.wait_end(await load.profile("rmsnorm_naive"))  # figures to render
        idle = empty()
        for _ in range(3 if quick else 60):
            await load.one_of_each(rng, idle)

        busy = empty()
        rss = {"load starts": rss_mb(load.pid)}
        profiles = 0
        stop = time.monotonic() + seconds
        half = time.monotonic() + seconds / 2

        async def editor() -> None:
            pending: dict[str, int] = {}
            while time.monotonic() < stop:
                name = list(texts)[load.edits // 2 % files]
                if name in pending:
                    load.edit(name, pending.pop(name), insert=False)
                else:
                    pending[name] = rng.randrange(20, lines - 20)
                    load.edit(name, pending[name], insert=True)
                await asyncio.sleep(edit_ms / 1000)
            for name, line in pending.items():  # leave every file as it was
                load.edit(name, line, insert=False)

        async def profiler() -> None:
            nonlocal profiles
            while time.monotonic() < stop:
                await load.wait_end(await load.profile("busy"))
                profiles += 1

        async def asker() -> None:
            while time.monotonic() < stop:
                await load.one_of_each(rng, busy)
                if "half way" not in rss and time.monotonic() > half:
                    rss["half way"] = rss_mb(load.pid)
                await asyncio.sleep(0.02)

        await asyncio.gather(editor(), profiler(), asker())
        rss["load ends"] = rss_mb(load.pid)
        await load.stop()

    load_avg = os.getloadavg()
    print(f"trnlens language server under load: {files} files of {lines} lines open, an edit "
          f"every {edit_ms:g} ms for {seconds:g} s ({load.edits} edits), {profiles} profiles "
          f"run meanwhile; load average {load_avg[0]:.2f} {load_avg[1]:.2f}")  # fmt: skip
    print(f"{'request':<10} {'idle p50':>9} {'idle p95':>9} {'load p50':>9} {'load p95':>9} "
          f"{'p95 ratio':>9} {'samples':>8}")  # fmt: skip
    for kind in idle:
        i50, i95 = statistics.median(idle[kind]) * 1e3, percentile(idle[kind], 0.95) * 1e3
        b50, b95 = statistics.median(busy[kind]) * 1e3, percentile(busy[kind], 0.95) * 1e3
        print(f"{kind:<10} {i50:>8.2f}ms {i95:>8.2f}ms {b50:>8.2f}ms {b95:>8.2f}ms "
              f"{b95 / i95:>8.1f}x {len(busy[kind]):>8}")  # fmt: skip
    first = rss["half way"] - rss["load starts"]
    second = rss["load ends"] - rss["half way"]
    print("server RSS: " + ", ".join(f"{k} {v:.0f} MB" for k, v in rss.items()))
    print(f"growth: first half {first:+.1f} MB, second half {second:+.1f} MB "
          f"(edits do not grow memory when the second half adds ~nothing)")  # fmt: skip


if __name__ == "__main__":
    quick = "--quick" in sys.argv[1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every phase once, tiny sizes")
    parser.add_argument("--files", type=int, default=3 if quick else 50)
    parser.add_argument("--seconds", type=float, default=2 if quick else 60)
    parser.add_argument("--edit-ms", type=float, default=50)
    parser.add_argument("--lines", type=int, default=100 if quick else 300)
    args = parser.parse_args()
    asyncio.run(main(args.files, args.seconds, args.edit_ms, args.lines, quick))
