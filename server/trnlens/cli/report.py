"""``trnlens report [RUN|PATH::QUALNAME] [--output FILE] [--open]``: a run as one HTML page.

Prints the page's path. The page needs nothing else (no network); ``--open`` shows it in the
default browser.
"""

from __future__ import annotations

import argparse
import sys
import webbrowser
from pathlib import Path

from trnlens import project
from trnlens.cli import exitcodes
from trnlens.report import build
from trnlens.store import Store


def register(sub) -> None:
    parser = sub.add_parser(
        "report",
        help="write a run (or a comparison) as one self-contained HTML page",
        description="Write the run report: one measured step's timeline in lanes (Python, "
        "dispatch, runtime, device, memory) with the gaps between dispatches, the per-line "
        "breakdown beside the source, the op table, the variants of a comparison side by side, "
        "and the run's facts. One HTML file, nothing loaded from the network.",
    )
    parser.add_argument(
        "run",
        nargs="?",
        metavar="RUN|PATH::QUALNAME",
        help="a run id (or prefix), a result.json, or a function's latest run (default: the "
        "project's latest run)",
    )
    parser.add_argument("--output", "-o", metavar="FILE", help="where to write the page "
                        "(default: beside the run's artifacts in .trnlens/)")  # fmt: skip
    parser.add_argument("--open", action="store_true", help="open it in the default browser")
    parser.add_argument("--project", default=".", help="project directory (default: here)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    start = Path(args.project).resolve()
    if args.run and "::" in args.run:
        start = Path(args.run.rsplit("::", 1)[0]).resolve()
    root = project.find_root(start)
    if not (root / ".trnlens" / "runs.sqlite").exists():
        print(f"trnlens: no runs stored under {root}: run trnlens profile first", file=sys.stderr)
        return exitcodes.USAGE
    output = Path(args.output).resolve() if args.output else None
    with Store(root) as store:
        try:
            runs = build.select(store, args.run, root)
            built = build.write(store, runs, root, output)
        except build.ReportError as exc:
            print(f"trnlens: {exc}", file=sys.stderr)
            return exitcodes.USAGE
        except OSError as exc:
            print(f"trnlens: cannot write the report: {exc}", file=sys.stderr)
            return exitcodes.USAGE
    print(built.path)
    if args.open:
        webbrowser.open(built.path.as_uri())
    return exitcodes.OK
