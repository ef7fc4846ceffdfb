"""``trnlens compare PATH::A PATH::B ...``: the same inputs through several implementations.

``trnlens compare --fix PATH::QUALNAME`` measures what the static analysis proposes: the
original, the analysis' fix of that function (sent to the agent as source text) and the
``torch.compile``d original, in one run.

``trnlens compare --checkpoint PATH::QUALNAME`` measures activation checkpointing of the module
class its latest run names (memoryfixes.py): the original and the same function with every
instance of that class checkpointed, each variant's peak memory and time, outputs compared.
"""

from __future__ import annotations

import argparse
import sys

from trnlens.cli import common, exitcodes, render
from trnlens.cli.notebook_lines import in_cells


def register(sub) -> None:
    parser = sub.add_parser(
        "compare",
        help="run several functions on the same inputs and compare them",
        description="Profile each PATH::QUALNAME on the first one's inputs; speed-ups come from "
        "a timing pass without the profiler (median, with the min-max range).",
    )
    parser.add_argument("specs", nargs="*", metavar="PATH::QUALNAME")
    parser.add_argument("--compiled", action="store_true",
                        help="also run the first one under torch.compile")  # fmt: skip
    parser.add_argument(
        "--fix",
        metavar="PATH::QUALNAME",
        help="compare the function with the static analysis' fix of it and with its "
        "torch.compile'd self (exit 2 when the analysis has no fix there)",
    )
    parser.add_argument(
        "--checkpoint",
        metavar="PATH::QUALNAME",
        help="compare the function with activation checkpointing of the module class its "
        "latest run kept most activations in (memory against time; exit 2 when the run names "
        "none: profile it first)",
    )
    common.add_run_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        specs = [common.parse_spec(spec) for spec in args.specs]
        fix = common.parse_spec(args.fix) if args.fix else None
        checkpoint = common.parse_spec(args.checkpoint) if args.checkpoint else None
    except common.UsageError as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    variants: list[dict[str, str | bool]] = [
        {"path": str(path), "qualname": qualname} for path, qualname in specs
    ]
    if fix is not None and checkpoint is not None:
        print("trnlens: --fix and --checkpoint are two comparisons: run one, then the other",
              file=sys.stderr)  # fmt: skip
        return exitcodes.USAGE
    measured = fix or checkpoint  # the function whose fix is measured, if any
    if measured is not None:
        try:
            fixed = _fix_variants(*measured) if fix else _checkpoint_variants(*measured)
        except ValueError as exc:
            print(f"trnlens: {exc}", file=sys.stderr)
            return exitcodes.USAGE
        variants = fixed + variants  # the original is the baseline; other specs follow
        specs = [measured, *specs]
    elif args.compiled and variants:
        variants.append({**variants[0], "compile": True})
    if len(variants) < 2:
        print("trnlens: compare needs two or more variants (or --compiled, or --fix)",
              file=sys.stderr)  # fmt: skip
        return exitcodes.USAGE
    root = common.root_for([path for path, _ in specs])
    outcome, code, store = common.execute(args, variants, root)
    if outcome is None:
        return code
    # a notebook's lines in its cells, as profile shows them (the JSON keeps both)
    shown = {**outcome, "variants": [in_cells(v) for v in outcome["variants"]]}
    return common.report(args, outcome, render.render_comparison(shown), outcome["variants"])


def _fix_variants(path, qualname: str) -> list[dict]:
    """Original, fixed, compiled; ValueError when the file cannot be read or has no fix there."""
    from trnlens import project
    from trnlens.analysis import analyse_source
    from trnlens.fixvariants import NoFix, fix_variants
    from trnlens.libraries.swap import swap_variants

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    root = project.find_root(path)
    try:
        relpath = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        relpath = path.as_posix()
    findings = analyse_source(text, relpath)
    try:
        return fix_variants(str(path), qualname, findings)
    except NoFix:
        pass
    try:  # the library code its latest run executed may have a fix (libraries/swap.py)
        return swap_variants(str(path), qualname, _latest_run(root, relpath, qualname))
    except NoFix as exc:
        hint = (
            f"trnlens check {relpath} lists its findings; a run (trnlens profile "
            f"{relpath}::{qualname}) finds those of the library code it calls"
        )
        raise ValueError(f"{exc} in {relpath} ({hint})") from None


def _checkpoint_variants(path, qualname: str) -> list[dict]:
    """Original, checkpointed; ValueError when the latest run names no class to checkpoint."""
    from trnlens import project
    from trnlens.fixvariants import NoFix
    from trnlens.memoryfixes import checkpoint_variants

    root = project.find_root(path)
    try:
        relpath = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        relpath = path.as_posix()
    run = _latest_run(root, relpath, qualname)
    try:
        return checkpoint_variants(str(path), qualname, run)
    except NoFix as exc:
        first = "" if run else f" (no stored run: trnlens profile {relpath}::{qualname} first)"
        raise ValueError(f"{exc}{first}") from None


def _latest_run(root, relpath: str, qualname: str) -> dict | None:
    """The function's latest stored run, without creating a store where there is none."""
    from trnlens.libraries.swap import latest_function_run
    from trnlens.store import Store, StoreError

    if not (root / ".trnlens" / "runs.sqlite").exists():
        return None
    try:
        store = Store(root)
    except StoreError:
        return None
    try:
        return latest_function_run(store, relpath, qualname)
    finally:
        store.close()
