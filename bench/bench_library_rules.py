"""Benchmark of the rules on the library code a run executed (libraries/rules.py), in one run.

What a run pays after the agent answers, before it is stored (in a worker thread, off the language
server's event loop): ``rules.attach`` on a result whose ``library_files`` name the nine files a
run of samples/tiny_llama.py::logits listed here (transformers 4.57.6, torch 2.13), then 50
modeling files (a run through many model classes). Cold, the baseline: every cache empty (a
one-shot CLI run, or the server's first run); warm: the same files again (the language server's
next run: each file is analysed once per content hash, then only read and hashed). Median of 5
rounds each; the ratio is cold over warm in the same run.

Run: python bench/bench_library_rules.py [--quick]
``--quick``: one round, 5 modeling files instead of 50, to show the bench runs to its end.
"""

from __future__ import annotations

import importlib.metadata
import statistics
import sys
import time

from trnlens.analysis import engine
from trnlens.libraries import rules

ROUNDS = 5
# The library_files of a run of samples/tiny_llama.py::logits here.
LLAMA_FILES = [
    "transformers/activations.py",
    "transformers/cache_utils.py",
    "transformers/integrations/sdpa_attention.py",
    "transformers/models/llama/modeling_llama.py",
    "transformers/utils/deprecation.py",
    "transformers/utils/generic.py",
]
TORCH_FILES = [
    "torch/nn/modules/linear.py",
    "torch/nn/modules/sparse.py",
    "torch/utils/_contextlib.py",
]


def located(dist_name: str, names: list[str]) -> list[str]:
    dist = importlib.metadata.distribution(dist_name)
    return [str(dist.locate_file(name)) for name in names]


def many_modeling_files(count: int) -> list[str]:
    dist = importlib.metadata.distribution("transformers")
    found = [
        str(dist.locate_file(f))
        for f in dist.files or []
        if str(f).startswith("transformers/models/") and f.name.startswith("modeling_")
        and str(f).endswith(".py")
    ]  # fmt: skip
    return sorted(found)[:count]


def result_for(paths: list[str]) -> dict:
    return {
        "dispatches_per_step": 155,
        "frames": [],
        "modules": [],
        "library_files": [{"path": p, "library": {"name": "x", "version": "1"}} for p in paths],
    }


def cold() -> None:
    rules._CACHE = rules._Cache()
    engine._PARSED = engine._LRU(1024)
    engine._PARSES = engine._LRU(65536)
    engine._ANALYSED = engine._LRU(65536)
    engine._FACTS = engine._LRU(65536)


def timed(paths: list[str], warm: bool, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        cold()
        if warm:
            rules.attach(result_for(paths))
        started = time.perf_counter()
        rules.attach(result_for(paths))
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    rounds, count = (1, 5) if quick else (ROUNDS, 50)
    llama = located("transformers", LLAMA_FILES) + located("torch", TORCH_FILES)
    many = many_modeling_files(count)
    print(f"{'library files':<40} {'cold ms':>9} {'warm ms':>9} {'cold/warm':>10}")
    cases = (("tiny Llama forward (9 files)", llama), (f"{count} modeling files", many))
    for label, paths in cases:
        cold_ms, warm_ms = timed(paths, False, rounds), timed(paths, True, rounds)
        print(f"{label:<40} {cold_ms:9.1f} {warm_ms:9.2f} {cold_ms / warm_ms:9.0f}x")


if __name__ == "__main__":
    main()
