"""``trnlens profile PATH::QUALNAME``: profile one function and print what it cost."""

from __future__ import annotations

import argparse
import sys

from trnlens.cli import common, exitcodes, render


def register(sub) -> None:
    parser = sub.add_parser(
        "profile",
        help="profile one function, method or nn.Module class",
        description="Profile PATH::QUALNAME (a function, Class.method, or an nn.Module Class) "
        "under torch.profiler and print CPU and device time, dispatches and per-line figures.",
    )
    parser.add_argument("spec", metavar="PATH::QUALNAME")
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="profile it under torch.compile (backend neuron on Neuron) without editing it, and "
        "report graph breaks, recompilations and compile time",
    )
    common.add_run_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        path, qualname = common.parse_spec(args.spec)
    except common.UsageError as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    root = common.root_for([path])
    variant = {"path": str(path), "qualname": qualname}
    if args.compiled:
        variant["compile"] = True
    outcome, code, store = common.execute(args, [variant], root)
    if outcome is None:
        return code
    text = render.render_result(outcome, root=root, store_dir=store.artifacts)
    return common.report(args, outcome, text, [outcome])
