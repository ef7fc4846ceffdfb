"""Benchmark: what attribution through every frame (agent/attribution.py, issue 21) costs.

A tiny random-weight LlamaForCausalLM from transformers (hidden 64, 2 layers, (1, 16) token ids,
nothing downloaded), profiled through a project function ``model(ids)``, in one process (torch
and transformers imported once), three ways, interleaved over several rounds:
- ``off``: no attribution pass at all (``options.lines = False``): the named baseline;
- ``lines``: the line-only mode trnlens had before issue 21 (``options.attribution = "lines"``);
- ``full``: innermost frame, project line and nn.Module of every dispatch (the default now).
Figures: the attribution pass's wall time (``accounting.attribution_us``: one step under the mode,
the profiler's warm-up step and its recorded steps) and the whole variant's (import, inputs, every
pass), medians over the rounds, and result.json's size. On a busy machine wall times say little,
so the modes' own cost is also measured directly: one forward under each mode (no profiler; the
same hooks and labels the pass uses), interleaved, as this thread's CPU time (``thread_time``:
what other processes do not inflate as much), median of many. Then the size of result.json for a
32-layer config of the same model (hidden 64), where the bounded tables matter.

Run: python bench/bench_attribution.py [--rounds N]
``--quick``: one round of short runs (two steps, nothing settled), 2 forwards under each mode, 4
layers for the big config, to show the bench runs to its end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import inprocess  # noqa: E402

MODEL = """
import torch
from transformers import LlamaConfig, LlamaForCausalLM

LAYERS = {layers}


def build():
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS,
                         num_attention_heads=4, num_key_value_heads=4, vocab_size=100,
                         max_position_embeddings=64)
    torch.manual_seed(0)
    return LlamaForCausalLM(config), torch.randint(0, 100, (1, 16))


# trnlens: inputs=build
def generate(model, ids):
    return model(ids).logits
"""
WAYS = {
    "off": {"lines": False},
    "lines": {"attribution": "lines"},
    "full": {"attribution": "full"},
}


def profile(root: Path, options: dict, steps: int = 5, quick: bool = False) -> dict:
    """One run; ``quick``: one warm-up step, two steps and two timed calls, none to settle."""
    variant = {"path": "model.py", "qualname": "generate"}
    return inprocess.profile(root, variant, options, quick=quick, warmup=2, steps=steps, repeats=5)


def mode_costs(root: Path, repeats: int) -> dict[str, list[float]]:
    """This thread's CPU time (µs) of one forward under each way's mode, interleaved."""
    import contextlib
    import importlib.util

    import torch
    from trnlens.agent import attribution, loader
    from trnlens.agent.lines import make_line_mode

    spec = importlib.util.spec_from_file_location("bench_llama", root / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, ids = module.build()
    model.eval()
    project = loader.Project(root=str(root))
    kinds = attribution.FrameKinds(project.is_project_file, project.relpath, torch)
    named = attribution.reachable_modules(torch, [("model", model)])

    def contexts(way):
        if way == "off":
            return [contextlib.nullcontext()]
        if way == "lines":
            return [make_line_mode(torch, project.is_project_file, project.relpath)]
        mode = attribution.make_attribution_mode(torch, kinds)
        names = {id(m): n for n, m in named}
        tracker = attribution.ModuleTracker(torch, kinds, names, [m for _, m in named])
        return [tracker, attribution.CompiledCallSites(torch, mode), mode]

    costs: dict[str, list[float]] = {w: [] for w in WAYS}
    with torch.inference_mode():
        for _ in range(repeats):
            for way in WAYS:
                with contextlib.ExitStack() as stack:
                    for context in contexts(way):
                        stack.enter_context(context)
                    module.generate(model, ids)  # the first call under a fresh mode: not counted
                    began = time.thread_time()
                    module.generate(model, ids)
                    costs[way].append((time.thread_time() - began) * 1e6)
    return costs


def size(result: dict) -> int:
    return len(json.dumps(result, indent=1).encode())  # as the store writes result.json


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one round, small sizes")
    parser.add_argument("--rounds", type=int, default=1 if quick else 5)
    rounds = parser.parse_args().rounds
    big_layers = 4 if quick else 32
    with tempfile.TemporaryDirectory() as tmp:
        small, big = Path(tmp, "small"), Path(tmp, "big")
        for root, layers in ((small, 2), (big, big_layers)):
            root.mkdir()
            (root / "model.py").write_text(MODEL.format(layers=layers).lstrip("\n"))
        # imports and first calls out of the figures
        profile(small, WAYS["full"], steps=2, quick=quick)
        figures: dict[str, dict[str, list]] = {w: {"pass": [], "variant": []} for w in WAYS}
        sizes: dict[str, int] = {}
        dispatches = None
        for _ in range(rounds):
            for way, options in WAYS.items():
                result = profile(small, options, quick=quick)
                accounting = result["accounting"]
                figures[way]["pass"].append(accounting.get("attribution_us", 0.0))
                figures[way]["variant"].append(accounting["variant_us"])
                sizes[way] = size(result)
                dispatches = result["dispatches_per_step"]
        load = os.getloadavg()[0]
        print(f"tiny Llama (hidden 64, 2 layers), {dispatches} dispatches/step; {rounds} rounds; "
              f"load {load:.1f} on {os.cpu_count()} cores")  # fmt: skip
        print(f"{'way':6} {'attribution pass (median)':>26} {'whole variant (median)':>24} "
              f"{'result.json':>12}")  # fmt: skip
        medians = {}
        for way in WAYS:
            p = statistics.median(figures[way]["pass"]) / 1000
            v = statistics.median(figures[way]["variant"]) / 1000
            medians[way] = (p, v)
            spread = (min(figures[way]["variant"]) / 1000, max(figures[way]["variant"]) / 1000)
            print(f"{way:6} {p:23.1f} ms {v:13.1f} ms ({spread[0]:.0f}-{spread[1]:.0f}) "
                  f"{sizes[way] / 1000:9.1f} KB")  # fmt: skip
        (lines_pass, lines_variant), (full_pass, full_variant) = medians["lines"], medians["full"]
        off_variant = medians["off"][1]
        print(f"full vs lines: attribution pass x{full_pass / lines_pass:.2f}, whole variant "
              f"x{full_variant / lines_variant:.2f}; full vs off (the baseline): whole variant "
              f"x{full_variant / off_variant:.2f}")  # fmt: skip

        costs = mode_costs(small, repeats=2 if quick else max(rounds * 6, 20))
        off = statistics.median(costs["off"])
        print(f"\none forward under each mode (thread CPU time, median of {len(costs['off'])}):")
        for way in WAYS:
            median, low, high = (f(costs[way]) / 1000 for f in (statistics.median, min, max))
            print(f"  {way:6} {median:7.2f} ms  x{median * 1000 / off:.2f} of off "
                  f"(min {low:.2f}, max {high:.2f})")  # fmt: skip
        full_cost, lines_cost = statistics.median(costs["full"]), statistics.median(costs["lines"])
        print(f"  full vs lines: x{full_cost / lines_cost:.2f}")

        full = profile(big, {**WAYS["full"], "timing": False}, steps=2, quick=quick)
        lines = profile(big, {**WAYS["lines"], "timing": False}, steps=2, quick=quick)
        print(f"\n{big_layers} layers (hidden 64), {full['dispatches_per_step']} dispatches/step: "
              f"result.json {size(full) / 1000:.1f} KB with full attribution, "
              f"{size(lines) / 1000:.1f} KB line-only")  # fmt: skip
        print(
            f"  frames kept {len(full['frames'])} (+{full['frames_rest']['count']} summed), "
            f"modules kept {len(full['modules'])} (+{full['modules_rest']['count']} summed)"
        )
        fields = ("frames", "modules", "host_syncs", "ops", "dispatch_sites", "dispatch_shapes")
        parts = {k: len(json.dumps(full.get(k)).encode()) for k in fields}
        print("  by field: " + ", ".join(f"{k} {v / 1000:.1f} KB" for k, v in parts.items()))


if __name__ == "__main__":
    main()
