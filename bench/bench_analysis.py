"""Benchmark of the static analysis, measured in one run and printed as one table.

1. Throughput: lines per second over every PyTorch modeling file of the pinned transformers
   (read as text, never imported), cold caches, one process.
2. Re-analysis latency after an edit: a 3,000-line real model file (cut at a top-level statement),
   analysed once, then re-analysed after each of 200 edits (a character typed into a line, and
   every third edit also inserting a line, which moves everything below); p50 and p95 against
   the 50 ms goal.

Run: python bench/bench_analysis.py [--quick]
``--quick``: 5 modeling files and 5 edits, to show the bench runs to its end.
"""

from __future__ import annotations

import ast
import importlib.metadata
import statistics
import sys
import time

from trnlens.analysis import analyse_source, engine

GOAL_P95_MS = 50.0
EDITS = 200
TARGET_LINES = 3000


def modeling_files(limit: int | None = None) -> dict[str, str]:
    """The modeling files' texts (the first ``limit`` of them)."""
    dist = importlib.metadata.distribution("transformers")
    out = {}
    for f in dist.files or []:
        name = str(f)
        if name.startswith("transformers/models/") and f.name.startswith("modeling_"):
            if name.endswith(".py") and len(out) != limit:
                out[name] = dist.locate_file(f).read_text(encoding="utf-8")
    return out


def cold_caches() -> None:
    engine._PARSED = engine._LRU(8192)
    engine._ANALYSED = engine._LRU(8192)
    engine._FACTS = engine._LRU(8192)


def throughput(files: dict[str, str]) -> tuple[int, int, float, int]:
    cold_caches()
    lines = sum(t.count("\n") for t in files.values())
    start = time.perf_counter()
    findings = sum(len(analyse_source(text, name)) for name, text in files.items())
    return len(files), lines, time.perf_counter() - start, findings


def three_thousand_lines(files: dict[str, str]) -> tuple[str, str]:
    """The largest modeling file cut at the last top-level statement before line 3,000."""
    name, text = max(files.items(), key=lambda kv: kv[1].count("\n"))
    tree = ast.parse(text)
    starts = [
        min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", []))]) for n in tree.body
    ]
    cut = max(s for s in starts if s <= TARGET_LINES + 1) - 1
    return name, "".join(text.splitlines(keepends=True)[:cut])


def edit_latencies(text: str, edits: int) -> list[float]:
    lines = text.splitlines(keepends=True)
    analyse_source(text, "bench.py")  # the file as opened
    times = []
    for i in range(edits):
        row = (37 + i * 97) % len(lines)
        lines[row] = lines[row].rstrip("\n") + "  \n"  # a typed character (trailing space)
        if i % 3 == 0:
            lines.insert(row, "\n")
        edited = "".join(lines)
        start = time.perf_counter()
        analyse_source(edited, "bench.py")
        times.append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    edits = 5 if quick else EDITS
    files = modeling_files(5 if quick else None)
    version = importlib.metadata.version("transformers")
    n_files, n_lines, seconds, n_findings = throughput(files)
    name, big = three_thousand_lines(files)
    cold_caches()
    start = time.perf_counter()
    analyse_source(big, "bench.py")
    first = (time.perf_counter() - start) * 1000
    times = sorted(t * 1000 for t in edit_latencies(big, edits))
    p50 = statistics.median(times)
    p95 = times[int(round(0.95 * len(times))) - 1]
    rows = [
        ("corpus", f"transformers {version}: {n_files} modeling files, {n_lines:,} lines"),
        (
            "throughput (cold)",
            f"{n_lines / seconds:,.0f} lines/s ({seconds:.1f} s, {n_findings} findings)",
        ),
        ("edited file (up to 3,000 lines)", f"{name.split('/')[-1]}, {big.count(chr(10)):,} lines"),
        ("first analysis", f"{first:.1f} ms"),
        (f"re-analysis after edit p50 ({edits} edits)", f"{p50:.1f} ms"),
        (f"re-analysis after edit p95 ({edits} edits)", f"{p95:.1f} ms"),
        (
            "p95 / goal (50 ms)",
            f"{p95 / GOAL_P95_MS:.2f} ({'met' if p95 <= GOAL_P95_MS else 'MISSED'})",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}} | value")
    print(f"{'-' * width}-+-{'-' * 50}")
    for key, value in rows:
        print(f"{key:<{width}} | {value}")


if __name__ == "__main__":
    main()
