"""One profile run inside the bench's own process (torch and transformers imported once), as the
agent runs a request: the benches that compare ways of the same run (an option on or off) call it
in interleaved rounds."""

from __future__ import annotations

from pathlib import Path


def profile(
    root: Path, variant: dict, options: dict, *, quick: bool, warmup: int, steps: int,
    repeats: int,
) -> dict:  # fmt: skip
    """One run of ``variant`` in ``root``; ``quick``: one warm-up step, two steps and two timed
    calls, none to settle (a bench's ``--quick``: every part once)."""
    from trnlens.agent.runner import Runner

    request = {
        "backend": "cpu",
        "warmup": 1 if quick else warmup,
        "steps": 2 if quick else steps,
        "repeats": 2 if quick else repeats,
        "project_root": str(root),
        "variants": [variant],
        "artifacts_dir": str(root / ".stage"),
        "options": {"trace": False, **options},
    }
    if quick:
        request["options"]["settle_steps"] = 0
    result = Runner(request, lambda m: None, lambda: False).run()
    if result.get("error"):
        raise SystemExit(f"the run failed: {result['error']['message']}")
    return result


def rounds_from_args(default: int = 5) -> tuple[int, bool]:
    """``--rounds N`` (``default``) and ``--quick`` (one round of short runs) from the command
    line: (rounds, quick)."""
    import argparse
    import sys

    quick = "--quick" in sys.argv[1:]
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one round of short runs")
    parser.add_argument("--rounds", type=int, default=1 if quick else default)
    return parser.parse_args().rounds, quick


def step_project(root: Path, text: str, name: str = "train.py") -> Path:
    """``root`` holding the bench's step as ``name``."""
    (root / name).write_text(text.lstrip("\n"))
    return root
