"""Benchmark: torch.compile's first-call compile time, and what collecting it costs (compilelog).

For a compiled RMSNorm without a break (1 graph) and with a print in the middle (2 graphs), each
profiled in fresh agent processes sharing one inductor cache directory made for this run (the
first process compiles with it empty, as on a machine that never compiled this code; the later
ones find inductor's on-disk cache warm, as on a developer's machine), prints, measured in one run:
  - the first call (compile included, cold and warm cache) against a warm call (the timing
    pass's median), and the compile split into tracing and backend (dynamo's metrics);
  - the collection's cost two ways: the time trnlens spent in its handlers and summary
    (``collection_us``, measured inside the run) as a share of the compiled profile's time, and
    the profile's time with collection against without (``options.compile_log: false``), medians
    of REPEATS fresh processes each, alternated so both see the same machine.
Goal: collection under 5% of the compiled profile's time.
Run: .venv/bin/python bench/bench_compile.py [--quick]
``--quick``: the function with a break only (its two graphs take every path the one-graph function
takes), one process each way, (2, 8, 32) inputs, short runs (two steps, nothing settled), to show
the bench runs to its end (a cold inductor cache still compiles for tens of seconds here).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPEATS = 3
MODULE = """
import torch


def inputs():
    return (torch.randn({shape}), torch.randn({dim}))


# trnlens: inputs=inputs
def one_graph(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


# trnlens: inputs=inputs
def with_break(x, w, eps=1e-6):
    v = x.pow(2).mean(-1, keepdim=True)
    print("between the graphs", file=__import__("sys").stderr)
    return x * torch.rsqrt(v + eps) * w
"""

# One profile request in a fresh interpreter: the agent's own runner, in process.
RUN = """
import json, sys
from trnlens.agent.runner import Runner
request = json.loads(sys.argv[1])
result = Runner(request, lambda m: None, lambda: False).run()
print(json.dumps(result))
"""


def profile(root: Path, qualname: str, collect: bool, cache: str, quick: bool) -> dict:
    request = {
        "backend": "cpu", "warmup": 1 if quick else 3, "steps": 2 if quick else 5,
        "repeats": 2 if quick else 20,
        "project_root": str(root), "artifacts_dir": str(root / ".stage"),
        "variants": [{"path": "model.py", "qualname": qualname, "compile": True}],
        "options": {"compile_log": collect, "trace": False},
    }  # fmt: skip
    if quick:
        request["options"]["settle_steps"] = 0
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    done = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(request)],
        cwd=root, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.1f} ms" if us < 1e6 else f"{us / 1e6:.2f} s"


def spread(values: list[float]) -> str:
    return f"{ms(statistics.median(values))} ({ms(min(values))}-{ms(max(values))})"


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    repeats, (shape, dim) = (1, ("2, 8, 32", 32)) if quick else (REPEATS, ("4, 512, 2048", 2048))
    load = os.getloadavg()
    rows_time, rows_cost = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
        (root / "model.py").write_text(textwrap.dedent(MODULE).format(shape=shape, dim=dim))
        cache = str(root / "inductor-cache")
        for qualname in ("with_break",) if quick else ("one_graph", "with_break"):
            cold = profile(root, qualname, True, cache, quick)  # inductor's cache still empty
            on, off = [], []
            for _ in range(repeats):  # alternated: both configurations see the same machine
                on.append(profile(root, qualname, True, cache, quick))
                off.append(profile(root, qualname, False, cache, quick))
            first = [r["first_call_us"] for r in on + off]
            warm = [r["timing"]["median_us"] for r in on + off]
            times = [r["compile"]["compile_time_us"] for r in on]
            graphs = on[0]["compile"]["graphs_per_call"]
            rows_time.append([
                qualname, str(graphs), ms(cold["first_call_us"]), spread(first), spread(warm),
                f"{statistics.median(first) / statistics.median(warm):,.0f}x",  # warm cache
                spread([t["tracing_us"] for t in times]), spread([t["backend_us"] for t in times]),
            ])  # fmt: skip
            profile_on = [r["accounting"]["variant_us"] for r in on]
            profile_off = [r["accounting"]["variant_us"] for r in off]
            collect = [r["compile"]["collection_us"] for r in on]
            share = [c / p for c, p in zip(collect, profile_on, strict=True)]
            delta = statistics.median(profile_on) / statistics.median(profile_off) - 1
            worst = f"{100 * statistics.median(share):.2f}% (max {100 * max(share):.2f}%)"
            rows_cost.append([
                qualname, spread(profile_off), spread(profile_on), f"{100 * delta:+.1f}%",
                spread(collect), worst,
            ])  # fmt: skip
    cores = os.cpu_count()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {cores} cores")
    print(
        "\nFirst call (compile included) vs a warm call; cold cache: one process; warm cache: "
        f"medians of {2 * repeats} fresh processes (min-max); tracing/backend: warm cache"
    )
    _table(["function", "graphs", "first call (cold cache)", "first call (warm cache)",
            "warm call", "ratio", "tracing", "backend"], rows_time)  # fmt: skip
    print(f"\nCollection cost; baseline: the same compiled profile without collection "
          f"(medians of {repeats} fresh processes each, min-max)")  # fmt: skip
    _table(["function", "profile, no collection", "profile, collection", "difference",
            "collection_us", "collection / profile"], rows_cost)  # fmt: skip
    after = os.getloadavg()
    print(f"\nload average after: {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}; the difference "
          "column is noise-bound (one compile varies by more than the collection costs): "
          "collection_us is measured inside the run")  # fmt: skip


def _table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
