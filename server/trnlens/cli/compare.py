"""``trnlens compare PATH::A PATH::B ...``: the same inputs through several implementations."""

from __future__ import annotations

import argparse
import sys

from trnlens.cli import common, exitcodes, render


def register(sub) -> None:
    parser = sub.add_parser(
        "compare",
        help="run several functions on the same inputs and compare them",
        description="Profile each PATH::QUALNAME on the first one's inputs; speed-ups come from "
        "a timing pass without the profiler (median, with the min-max range).",
    )
    parser.add_argument("specs", nargs="+", metavar="PATH::QUALNAME")
    parser.add_argument("--compiled", action="store_true",
                        help="also run the first one under torch.compile")  # fmt: skip
    common.add_run_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        specs = [common.parse_spec(spec) for spec in args.specs]
    except common.UsageError as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    variants = [{"path": str(path), "qualname": qualname} for path, qualname in specs]
    if args.compiled:
        variants.append({**variants[0], "compile": True})
    if len(variants) < 2:
        print("trnlens: compare needs two or more variants (or --compiled)", file=sys.stderr)
        return exitcodes.USAGE
    root = common.root_for([path for path, _ in specs])
    outcome, code, store = common.execute(args, variants, root)
    if outcome is None:
        return code
    return common.report(args, outcome, render.render_comparison(outcome), outcome["variants"])
