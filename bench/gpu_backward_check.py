"""GPU check of backward at its forward (agent/backward/, issue 32) on the cuda backend.

On CUDA the autograd engine runs backward on its device thread, not the thread that called
``backward()``: the link must go through ``fwd_thread``. This profiles the fine-tuning step of
tests/agent/backward/by_hand.py (tiny random-weight Llama, AdamW foreach) on the backend asked for
with the agent in this process, counts backward per module by hand with plain torch.profiler, and
prints both: the dispatches the engine ran, how many trnlens put on modules, the ones left on the
``backward()`` line, and each module whose count differs. Exit status 1 when a count differs or
fewer than 80% of the engine's dispatches reach a module.

Run: python bench/gpu_backward_check.py [--backend cuda|cpu]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "server"))  # the agent alone: nothing else of trnlens needed

from trnlens.agent.runner import Runner  # noqa: E402

from tests.agent.backward.by_hand import TRAIN, backward_by_hand  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="cuda")
    backend = parser.parse_args().backend
    device = "cuda" if backend == "cuda" else "cpu"
    source = TRAIN.replace('DEVICE = "cpu"', f'DEVICE = "{device}"')
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "train.py").write_text(source.lstrip("\n"))
        request = {
            "backend": backend, "warmup": 2, "steps": 3, "repeats": 3,
            "project_root": str(root), "artifacts_dir": str(root / ".stage"),
            "variants": [{"path": "train.py", "qualname": "step"}],
            "options": {"trace": False, "attribution_limit": "all"},
        }  # fmt: skip
        result = Runner(request, lambda m: None, lambda: False).run()
        if result.get("error"):
            print("run failed:", result["error"])
            return 1
        namespace: dict = {}
        exec(compile(source, str(root / "train.py"), "exec"), namespace)
        counts, engine_run, unlinked = backward_by_hand(*namespace["build"]())
    seen: dict = defaultdict(int)
    ours = {}
    for row in result["modules"]:
        ours[(row["type"], seen[row["type"]])] = row.get("backward_dispatches_per_step", 0)
        seen[row["type"]] += 1
    on_modules = sum(ours.values())
    print(f"backend {result['backend']} ({result['device']}), torch {result['versions']}")
    print(f"dispatches/step {result['dispatches_per_step']}; engine-run (by hand) {engine_run}, "
          f"unlinked by hand {unlinked}; on modules: trnlens {on_modules:g}, by hand "
          f"{sum(counts.values())}")  # fmt: skip
    for line in result["lines"]:
        print(f"  line {line['line']}: {line['dispatches']} dispatches, backward "
              f"{(line.get('backward') or {}).get('dispatches', 0)}")  # fmt: skip
    differ = {k: (ours.get(k, 0), counts.get(k, 0)) for k in set(ours) | set(counts)
              if ours.get(k, 0) != counts.get(k, 0)}  # fmt: skip
    for key, (a, b) in sorted(differ.items()):
        print(f"  differs: {key}: trnlens {a:g}, by hand {b}")
    ok = not differ and on_modules >= 0.8 * engine_run
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
