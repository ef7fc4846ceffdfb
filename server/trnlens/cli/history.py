"""``trnlens history PATH::QUALNAME``: every run of a function, with the change against the
previous comparable run (same target, backend, mode and inputs). Renames keep the history."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trnlens import history, project
from trnlens.agent import sources
from trnlens.cli import common, exitcodes
from trnlens.cli.render import fmt_count, fmt_time, table
from trnlens.store import Store


def register(sub) -> None:
    parser = sub.add_parser(
        "history",
        help="a function's runs over time, with the change against the previous comparable run",
        description="List the stored runs of PATH::QUALNAME, newest first (including those made "
        "under its earlier names: git renames, or the same source at another path). 'change' "
        "is against the previous run with the same target, backend, mode and inputs; "
        "'regression' needs the threshold and each run's measured spread exceeded, on runs whose "
        "timing was reliable (else 'noisy'); under the threshold it reads 'no change', over it but "
        "within the spread 'within noise'.",
    )
    parser.add_argument("spec", metavar="PATH::QUALNAME")
    parser.add_argument("--format", default="table", choices=["table", "json"])
    parser.add_argument("--limit", type=common.positive_int, default=50, help="newest N runs (50)")
    parser.add_argument(
        "--threshold",
        type=common.non_negative_float,
        default=100 * history.DEFAULT_THRESHOLD,
        metavar="PCT",
        help="slowdown (percent) from which a change can be a regression (10)",
    )
    parser.set_defaults(func=run)


def parse_identity(spec: str) -> tuple[Path, str, str]:
    """(root, relative path, qualname); the file need not exist any more."""
    if "::" not in spec:
        raise ValueError(f"expected PATH::QUALNAME (e.g. model.py::RMSNorm.forward), got {spec!r}")
    path_text, qualname = spec.rsplit("::", 1)
    if not qualname or not all(part.isidentifier() for part in qualname.split(".")):
        raise ValueError(f"not a qualified name: {qualname!r}")
    path = Path(path_text).expanduser().resolve()
    root = project.find_root(path)
    try:
        relpath = path.relative_to(root.resolve()).as_posix()
    except ValueError:
        relpath = path.as_posix()
    return root, relpath, qualname


def current_hash(root: Path, relpath: str, qualname: str) -> str | None:
    try:
        text = (root / relpath).read_text("utf-8")
        return sources.source_hash(text, sources.find_definition(text, qualname, relpath))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, sources.DefinitionNotFound):
        return None


def entries(store: Store, root: Path, relpath: str, qualname: str, limit: int, threshold: float):
    now = current_hash(root, relpath, qualname)
    line = history.lineage(store, root, relpath, qualname, current_hash=now)
    found = []
    for entry in history.entries(store, line, threshold, limit=max(limit, 200))[:limit]:
        run = entry.run
        found.append(
            entry.row(
                inputs=run.get("inputs"),
                variant=(run.get("variant") or {}).get("label"),
                timing=run.get("timing"),
                device_time_per_step_us=run.get("device_time_per_step_us"),
                dispatches_per_step=run.get("dispatches_per_step"),
                error=run.get("error"),
                stale=now is None or run["function"].get("source_hash") != now,
            )
        )
    return line, found


def run(args: argparse.Namespace) -> int:
    try:
        root, relpath, qualname = parse_identity(args.spec)
    except ValueError as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    if not (root / ".trnlens" / "runs.sqlite").exists():
        found, line = [], history.Lineage(relpath, qualname, [(relpath, qualname)])
    else:
        with Store(root) as store:
            line, found = entries(store, root, relpath, qualname, args.limit, args.threshold / 100)
    if args.format == "json":
        aliases = [f"{p}::{q}" for p, q in line.aliases]
        print(json.dumps({"identity": line.identity, "aliases": aliases, "runs": found}, indent=1))
        return exitcodes.OK
    print(render(line, found))
    return exitcodes.OK


def render(line: history.Lineage, found: list[dict]) -> str:
    if not found:
        return f"{line.identity}: no runs stored"
    out = [line.identity]
    if len(line.aliases) > 1:
        out.append("  also known as: " + ", ".join(f"{p}::{q}" for p, q in line.aliases[1:]))
    headers = ["Run", "When", "Commit", "Target", "Backend", "Mode", "Headline/step", "Range",
               "Dispatches", "Change", ""]  # fmt: skip
    rows = []
    for e in found:
        timing = e["timing"] or {}
        notes = []
        if e["identity"] != line.identity:
            notes.append(f"as {e['identity']}")
        if e["variant"] and e["variant"] != e["identity"].rsplit("::", 1)[-1]:
            notes.append(f"variant {e['variant']}")
        if e["stale"]:
            notes.append("stale")
        change = e["change"]
        if e["error"]:
            median, spread, change_text = "failed", "", ""
            notes.append(e["error"].get("type") or e["error"].get("kind") or "error")
        else:
            median = e["headline"]  # the figure "Change" compares (trnlens.headline)
            spread = f"{fmt_time(timing['min_us'])}-{fmt_time(timing['max_us'])}" if timing else "-"
            change_text = history.change_text(change) if change else "-"
        rows.append(
            [
                e["run_id"],
                (e["created_at"] or "")[:19].replace("T", " "),
                (e["git_commit"] or "-")[:8],
                e["target"] or "-",
                e["backend"] or "-",
                e["mode"] or "-",
                median,
                spread,
                fmt_count(e["dispatches_per_step"]),
                change_text,
                ", ".join(notes),
            ]
        )
    out.extend(table(headers, rows, {6, 7, 8}))
    return "\n".join(out)
