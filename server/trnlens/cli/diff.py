"""``trnlens diff RUN_A RUN_B``: RUN_B against RUN_A, headline, per op and per line.

A run is a stored run id (or a unique prefix of one) or a path to a ``result.json``. With
``--fail-above PCT`` the exit code is 1 when RUN_B is a regression beyond PCT percent (and beyond
the two runs' measured spread: see :mod:`trnlens.history`), for CI.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trnlens import history, project, results
from trnlens.cli import exitcodes
from trnlens.cli.render import fmt_count, fmt_time, table
from trnlens.store import Store


def register(sub) -> None:
    parser = sub.add_parser(
        "diff",
        help="compare two runs: headline, per op and per line; exit 1 on a regression (CI)",
        description="Show RUN_B against RUN_A. A run is a run id (or unique prefix) from the "
        "project's .trnlens/ store, or a path to a result.json.",
    )
    parser.add_argument("run_a", metavar="RUN_A")
    parser.add_argument("run_b", metavar="RUN_B")
    parser.add_argument(
        "--fail-above",
        type=float,
        metavar="PCT",
        help="exit 1 when RUN_B is slower than RUN_A by more than PCT percent and more than "
        "the two runs' measured spread",
    )
    parser.add_argument("--format", default="table", choices=["table", "json"])
    parser.add_argument(
        "--project", metavar="DIR", help="project holding .trnlens/ (default: from the cwd)"
    )
    parser.set_defaults(func=run)


class NotFound(LookupError):
    pass


def load(spec: str, store: Store | None) -> dict:
    path = Path(spec)
    if spec.endswith(".json") and path.is_file():
        return results.check(json.loads(path.read_text("utf-8")))
    if store is None:
        raise NotFound(f"no run {spec!r}: no .trnlens/ store here (use --project DIR)")
    ids = store.find_run_id(spec)
    if not ids:
        raise NotFound(f"no run {spec!r} in {store.root}")
    if len(ids) > 1 and spec not in ids:
        raise NotFound(f"run id prefix {spec!r} is ambiguous ({', '.join(ids)}, ...)")
    found = store.get(spec if spec in ids else ids[0])
    if found is None:
        raise NotFound(f"no run {spec!r}")
    return found


def run(args: argparse.Namespace) -> int:
    root = Path(args.project).resolve() if args.project else project.find_root(Path.cwd())
    store = Store(root) if (root / ".trnlens" / "runs.sqlite").exists() else None
    try:
        a, b = load(args.run_a, store), load(args.run_b, store)
    except (NotFound, ValueError) as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    finally:
        if store is not None:
            store.close()
    for run_ in (a, b):
        if "variants" in run_:
            print("trnlens: diff takes single runs, not a comparison", file=sys.stderr)
            return exitcodes.USAGE
    threshold = args.fail_above if args.fail_above is not None else 100 * history.DEFAULT_THRESHOLD
    report = history.diff(a, b, threshold / 100)
    if not report["comparable"]:
        print(
            "trnlens: warning: the runs are not comparable (target, backend, mode, inputs or "
            "variant differ)",
            file=sys.stderr,
        )
    print(json.dumps(report, indent=1) if args.format == "json" else render(report))
    if args.fail_above is not None and report["regression"]:
        return exitcodes.FINDINGS
    return exitcodes.OK


def _delta(pair: dict, time: bool = True) -> str:
    if pair["delta"] is None:
        return "new" if pair["a"] is None else "gone"
    text = fmt_time(pair["delta"]) if time else fmt_count(pair["delta"])
    text = text if pair["delta"] < 0 else "+" + text
    if pair["pct"] is not None:
        text += f" ({history.percent(pair['pct'] / 100)})"
    return text


def render(report: dict) -> str:
    a, b = report["a"], report["b"]
    out = [
        f"A {a['run_id']}  {a['identity']}  {a['created_at']}  {(a['git_commit'] or '-')[:8]}",
        f"B {b['run_id']}  {b['identity']}  {b['created_at']}  {(b['git_commit'] or '-')[:8]}",
    ]
    if not report["same_source"]:
        out.append("  (the function's source differs between the two runs)")
    change = report["change"]
    if change is None:
        out.append("no comparable figure (a run failed or has no timing)")
    else:
        basis = "median (timing pass)" if change["basis"] == "timing" else "device time/step"
        spread = (
            f"spread {fmt_time(change['spread_us'])}"
            if change["spread_us"] is not None
            else "spread not measured"
        )
        verdict = (
            f"REGRESSION beyond {change['threshold_pct']:g}% and the spread"
            if change["regression"]
            else "no regression"
        )
        out.append(
            f"{basis}: {fmt_time(change['base_median_us'])} -> {fmt_time(change['run_median_us'])}"
            f"  {history.percent(change['change_pct'] / 100)}  ({spread}; {verdict})"
        )
    rows = []
    names = {
        "device_time_per_step_us": "device/step",
        "cpu_time_per_step_us": "CPU/step",
        "wall_time_per_step_us": "wall/step",
        "dispatches_per_step": "dispatches",
    }
    for key, pair in report["figures"].items():
        is_time = key != "dispatches_per_step"
        show = fmt_time if is_time else fmt_count
        rows.append([names[key], show(pair["a"]), show(pair["b"]), _delta(pair, is_time)])
    out.append("")
    out.extend(table(["Figure", "A", "B", "Change"], rows, {1, 2, 3}))
    if report["ops"]:
        rows = []
        for op in report["ops"][:20]:
            dev = op["self_device_us"]
            rows.append(
                [
                    op["name"][:48],
                    fmt_count(op["calls"]["a"]),
                    fmt_count(op["calls"]["b"]),
                    fmt_time(dev["a"]),
                    fmt_time(dev["b"]),
                    _delta(dev),
                ]
            )
        out.append("")
        out.append("Ops (self device time per step)")
        out.extend(table(["Op", "Calls A", "Calls B", "A", "B", "Change"], rows, {1, 2, 3, 4, 5}))
    if report["lines"]:
        rows = []
        for line in report["lines"]:
            dev = line["device_us"]
            rows.append(
                [
                    f"{line['path']}:{line['line']}",
                    fmt_time(dev["a"]),
                    fmt_time(dev["b"]),
                    _delta(dev),
                    f"{fmt_count(line['dispatches']['a'])} -> {fmt_count(line['dispatches']['b'])}",
                ]
            )
        out.append("")
        out.append("Lines (device time per step)")
        out.extend(table(["Line", "A", "B", "Change", "Dispatches"], rows, {1, 2, 3}))
    return "\n".join(out)
