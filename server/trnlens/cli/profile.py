"""``trnlens profile PATH::QUALNAME``: profile one function and print what it cost."""

from __future__ import annotations

import argparse
import sys

from trnlens.cli import common, exitcodes, render
from trnlens.cli.notebook_lines import in_cells
from trnlens.cli.render_attribution import MODULES_SHOWN

ATTRIBUTION_KEPT = 50  # the agent's default attribution_limit (agent/measure.py)


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
    parser.add_argument(
        "--modules",
        default=str(MODULES_SHOWN),
        metavar="N|all",
        help=f"modules the Modules table shows, by total time ({MODULES_SHOWN}); all: every "
        "module called (the run then keeps every module and source line in its result)",
    )
    common.add_run_options(parser)
    parser.set_defaults(func=run)


def _modules_shown(text: str) -> int | None:
    if text == "all":
        return None
    if not text.isdigit() or int(text) < 1:
        raise common.UsageError(f"--modules takes a positive number or 'all', got {text!r}")
    return int(text)


def run(args: argparse.Namespace) -> int:
    try:
        path, qualname = common.parse_spec(args.spec)
        shown = _modules_shown(args.modules)
    except common.UsageError as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    root = common.root_for([path])
    variant: dict[str, str | bool] = {"path": str(path), "qualname": qualname}
    if args.compiled:
        variant["compile"] = True
    # The agent keeps the top 50 modules and lines (the rest summed); more shown: more kept.
    options: dict[str, str | int] = {"attribution_limit": "all"} if shown is None else {}
    if shown is not None and shown > ATTRIBUTION_KEPT:
        options = {"attribution_limit": shown}
    outcome, code, store = common.execute(args, [variant], root, options=options)
    if outcome is None:
        return code
    shown_data = in_cells(outcome)  # a notebook's lines in its cells
    text = render.render_result(shown_data, root=root, store_dir=store.artifacts, modules=shown)
    return common.report(args, outcome, text, [outcome])
