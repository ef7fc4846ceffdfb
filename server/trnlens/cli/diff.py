"""``trnlens diff RUN_A RUN_B``: RUN_B against RUN_A, headline, per op and per line.

A run is a stored run id (or a unique prefix of one) or a path to a ``result.json``. With
``--fail-above PCT`` the exit code is 1 when RUN_B is a regression beyond PCT percent (and beyond
each run's measured spread, on runs whose timing was reliable: see :mod:`trnlens.history`), for
CI. The verdict and the table's first row are the same statistic (the timing pass's median);
lines are matched by their source text when both runs recorded it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trnlens import history, outcome, project
from trnlens.cli import common, exitcodes
from trnlens.cli.notebook_lines import in_cells
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
        type=common.non_negative_float,
        metavar="PCT",
        help="exit 1 when RUN_B is slower than RUN_A by more than PCT percent and more than "
        "each run's measured spread (runs on a busy machine give no verdict)",
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
        read = outcome.parse(json.loads(path.read_text("utf-8")))
        if isinstance(read, outcome.ComparisonResult):
            raise ValueError(f"diff takes single runs, not a comparison ({spec})")
        return read.data
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
    threshold = args.fail_above if args.fail_above is not None else 100 * history.DEFAULT_THRESHOLD
    if args.format != "json":  # a notebook's lines in its cells, as profile shows them
        a, b = in_cells(a), in_cells(b)
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
    if pair["delta"] == 0:
        return "±0"
    text = fmt_time(abs(pair["delta"])) if time else fmt_count(abs(pair["delta"]))
    text = ("-" if pair["delta"] < 0 else "+") + text
    if pair["pct"] is not None:
        text += f" ({history.percent(pair['pct'] / 100)})"
    return text


def _device_label(run: dict) -> str:
    """What the runs' device time is called (the time basis): never 'device' for CPU time."""
    if run.get("time_basis") == "cpu":
        return "CPU (ops)"
    return (run.get("backend") or "device").upper()


def _verdict(change: dict) -> str:
    pct = history.percent(change["change_pct"] / 100)
    spread = (
        f"each run's spread {fmt_time(change['spread_us'])}"
        if change["spread_us"] is not None
        else "spread not measured"
    )
    verdict = change.get("verdict") or ("regression" if change["regression"] else "no change")
    if verdict == "regression":
        return f"REGRESSION: B is {pct} slower, beyond {change['threshold_pct']:g}% and {spread}"
    if verdict == "faster":
        return f"B is faster: {pct}, beyond {change['threshold_pct']:g}% and {spread}"
    if verdict == "noisy":
        return (
            f"{pct}, but a run's timing was unreliable (busy machine or wide spread): no "
            "verdict; measure both again on a quiet machine"
        )
    if abs(change["change_pct"]) > change["threshold_pct"]:  # the spread covers it, not the bar
        return f"within noise: {pct} is beyond {change['threshold_pct']:g}% but within {spread}"
    return f"no change: {pct} is within {change['threshold_pct']:g}%"


def render(report: dict) -> str:
    a, b = report["a"], report["b"]
    dev = _device_label(a)
    out = [
        f"A {a['run_id']}  {a['identity']}  {a['created_at']}  {(a['git_commit'] or '-')[:8]}",
        f"B {b['run_id']}  {b['identity']}  {b['created_at']}  {(b['git_commit'] or '-')[:8]}",
    ]
    if not report["same_source"]:
        out.append("  (the function's source differs between the two runs)")
    change = report["change"]
    statistic = "median (timing pass, no profiler)"
    if change is None:
        out.append("no comparable figure (a run failed or has no timing)")
    else:
        if change["basis"] != "timing":
            statistic = f"{dev}/step (profiled; no timing pass)"
        out.append(f"verdict on the {statistic}: {_verdict(change)}")
        if history.dispatch_text(change):  # a count: a change whatever the time's noise
            out.append(f"dispatches changed: {history.dispatch_text(change)} per step")
    rows = []
    if change is not None:  # the verdict's own statistic first: the table says what it read
        pair = {"a": change["base_median_us"], "b": change["run_median_us"],
                "delta": change["delta_us"], "pct": change["change_pct"]}  # fmt: skip
        rows.append([statistic, fmt_time(pair["a"]), fmt_time(pair["b"]), _delta(pair)])
    names = {
        "device_time_per_step_us": f"{dev}/step (profiled)",
        "cpu_time_per_step_us": "CPU/step (profiled step)",
        "wall_time_per_step_us": "wall/step (profiled)",
        "dispatches_per_step": "dispatches",
    }
    for key, pair in report["figures"].items():
        if key == "device_time_per_step_us" and change and change["basis"] != "timing":
            continue  # it is the verdict's row already
        is_time = key != "dispatches_per_step"
        show = fmt_time if is_time else fmt_count
        rows.append([names[key], show(pair["a"]), show(pair["b"]), _delta(pair, is_time)])
    out.append("")
    out.extend(table(["Figure", "A", "B", "Change"], rows, {1, 2, 3}))
    if change is not None and change["basis"] == "timing":
        out.append(
            "  (profiled figures carry the profiler's per-op cost, which differs between code "
            "shapes: the verdict reads the unprofiled median)"
        )
    if report["ops"]:
        rows = []
        for op in report["ops"][:20]:
            dev_pair = op["self_device_us"]
            rows.append(
                [
                    op["name"][:48],
                    fmt_count(op["calls"]["a"]),
                    fmt_count(op["calls"]["b"]),
                    fmt_time(dev_pair["a"]),
                    fmt_time(dev_pair["b"]),
                    _delta(dev_pair),
                ]
            )
        out.append("")
        out.append(f"Ops (self {dev} time per step, profiled)")
        out.extend(table(["Op", "Calls A", "Calls B", "A", "B", "Change"], rows, {1, 2, 3, 4, 5}))
    if report["lines"]:
        rows = []
        for line in report["lines"]:
            dev_pair = line["device_us"]
            where = f"{line['path']}:{line['line']}"
            if line.get("line_a") is not None and line["line_a"] != line["line"]:
                where += f" (A: {line['line_a']})"
            rows.append(
                [
                    where,
                    fmt_time(dev_pair["a"]),
                    fmt_time(dev_pair["b"]),
                    _delta(dev_pair),
                    f"{fmt_count(line['dispatches']['a'])} -> {fmt_count(line['dispatches']['b'])}",
                    (line.get("text") or "")[:50],
                ]
            )
        out.append("")
        matched = report.get("lines_matched_by", "number")
        how = "matched by their source text" if matched == "content" else "matched by number"
        out.append(f"Lines ({dev} time per step, profiled; {how})")
        out.extend(table(["Line", "A", "B", "Change", "Dispatches", "Source"], rows, {1, 2, 3}))
    return "\n".join(out)
