"""``trnlens check PATH...``: static analysis from the terminal and CI (no torch needed)."""

from __future__ import annotations

import argparse
import sys

from trnlens.analysis import RULES
from trnlens.analysis.batch import check_files
from trnlens.analysis.cache import CheckCache
from trnlens.analysis.discovery import python_files
from trnlens.analysis.formats import FORMATS, render, statistics
from trnlens.cli import exitcodes


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="find costly PyTorch patterns (naive RMSNorm, host syncs in loops...) statically",
        description=(
            "Analyse Python files without running them. Exit 1 when findings at or above "
            "--fail-on remain (by default warnings and errors: information and hints are shown "
            "but do not fail the run)."
        ),
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    parser.add_argument(
        "--select",
        action="append",
        default=None,
        metavar="CODES",
        help="only these codes or prefixes, comma-separated (e.g. TRN001,TRN1)",
    )
    parser.add_argument(
        "--ignore",
        action="append",
        default=None,
        metavar="CODES",
        help="skip these codes or prefixes, comma-separated",
    )
    parser.add_argument("--fix", action="store_true", help="apply safe fixes to the files")
    parser.add_argument(
        "--statistics", action="store_true", help="print the number of findings per rule"
    )
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format")
    parser.add_argument(
        "--fail-on",
        choices=[*SEVERITY_RANK, "never"],
        default="warning",
        help="exit 1 when a finding of this severity or above remains (default: warning; "
        "`hint` fails on any finding, `never` only on usage errors)",
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=_positive,
        default=None,
        metavar="N",
        help="analyse on N processes (default: every core)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="analyse every file again (the cache, in the user's cache directory, is keyed by "
        "each file's content, trnlens's version and the selected rules)",
    )
    parser.set_defaults(func=run)


# Severities from the most to the least severe (a finding's ``severity``).
SEVERITY_RANK = {"error": 3, "warning": 2, "info": 1, "hint": 0}


def fails(findings: list, fail_on: str) -> bool:
    """Whether a finding at or above ``fail_on`` remains."""
    if fail_on == "never":
        return False
    floor = SEVERITY_RANK[fail_on]
    return any(SEVERITY_RANK.get(f.severity, SEVERITY_RANK["error"]) >= floor for f in findings)


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {value!r}")
    return number


def _codes(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


def run(args: argparse.Namespace) -> int:
    try:
        files = python_files(args.paths)
    except FileNotFoundError as exc:
        print(f"trnlens check: no such file or directory: {exc.args[0]}", file=sys.stderr)
        return exitcodes.USAGE
    select, ignore = _codes(args.select), _codes(args.ignore)
    cache = None if args.no_cache or args.fix else CheckCache(files, select, ignore)
    results = check_files(files, select, ignore, fix=args.fix, workers=args.jobs, cache=cache)
    findings = [f for r in results for f in r.findings]
    if args.statistics:
        sys.stdout.write(statistics(findings, args.format, RULES))
    else:
        sys.stdout.write(render(findings, args.format, RULES))
    fixed = sum(r.fixed for r in results)
    for r in results:
        if r.error:
            print(f"trnlens check: {r.path}: {r.error}", file=sys.stderr)
    if args.format == "text":
        summary = f"{len(findings)} finding{'s' if len(findings) != 1 else ''}"
        if args.fix:
            summary += f" remaining, {fixed} fixed"
        print(f"{summary} in {len(files)} file{'s' if len(files) != 1 else ''}.", file=sys.stderr)
    return exitcodes.FINDINGS if fails(findings, args.fail_on) else exitcodes.OK
