"""Which runs a report shows, where it is written, and writing it.

``trnlens report [RUN|PATH::QUALNAME]`` and the language server's ``trnlens.server.report`` both
come here. RUN is a run id (or a unique prefix) or a ``result.json`` path; PATH::QUALNAME means
that function's latest run; nothing means the project's latest run. A run that was one variant of
a comparison brings its whole comparison. The page goes next to the run's artifacts
(``.trnlens/artifacts/<run>/report.html``, ``comparison.html`` in the baseline's directory) so
that its relative links to the chrome trace and NEFF/NTFF resolve, unless ``output`` says where.
A report already written for the same runs is reused (its runs never change once stored).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path

from trnlens import outcome
from trnlens.report import page
from trnlens.report import views as report_views
from trnlens.report.trace import MAX_EVENTS
from trnlens.store import Store

# Bumped when the page changes, so that reports written by an older trnlens are rebuilt.
REPORT_VERSION = "2"  # 2: module tree, library lines, comparison rounds, ranks


class ReportError(ValueError):
    """What the user asked for names no run (the message says what to do)."""


@dataclass
class Built:
    path: Path
    run_ids: list[str]
    reused: bool
    root: Path


def select(store: Store, what: str | None, root: Path) -> list[dict]:
    """The runs to show: one run, or every variant of its comparison (baseline first)."""
    if what is None:
        latest = store.runs(limit=1)
        if not latest:
            raise ReportError("no runs stored in this project yet: run trnlens profile first")
        return store.comparison(latest[0]["run_id"])
    if "::" in what:
        path_text, qualname = what.rsplit("::", 1)
        relpath = _relpath(Path(path_text), root)
        found = store.latest(relpath, qualname)
        if found is None:
            raise ReportError(f"no run of {relpath}::{qualname} is stored")
        return store.comparison(found["run_id"])
    if what.endswith(".json") and Path(what).is_file():
        try:
            read = outcome.parse(json.loads(Path(what).read_text("utf-8")))
        except (OSError, ValueError) as exc:
            raise ReportError(f"{what}: {exc}") from None
        if isinstance(read, outcome.ComparisonResult):
            return [run.data for run in read.variants]
        result = read.data
        stored = store.comparison(result["run_id"]) if result.get("run_id") else []
        return stored or [result]
    ids = store.find_run_id(what)
    if len(ids) != 1:
        raise ReportError(f"{'no run' if not ids else f'{len(ids)} runs'} match {what!r}")
    return store.comparison(ids[0])


def _relpath(path: Path, root: Path) -> str:
    absolute = path.expanduser().resolve()
    try:
        return absolute.relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def default_output(store: Store, runs: list[dict]) -> Path:
    run_dir = store.artifacts / str(runs[0]["run_id"])
    return run_dir / ("comparison.html" if len(runs) > 1 else "report.html")


def write(
    store: Store,
    runs: list[dict],
    root: Path,
    output: Path | None = None,
    max_events: int = MAX_EVENTS,
    reuse: bool = True,
) -> Built:
    """Writes the report (atomically) and returns where; reuses an up-to-date one."""
    if not runs:
        raise ReportError("nothing to report")
    run_ids = [str(r.get("run_id")) for r in runs]
    target = (output or default_output(store, runs)).resolve()
    stamp = f"<!-- trnlens report {REPORT_VERSION} {' '.join(run_ids)} -->"
    if reuse and output is None and _starts_with(target, stamp):
        return Built(target, run_ids, True, root)
    view = report_views.build(runs, root, store.artifacts, target.parent, max_events)
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = stamp + "\n" + page.render(view, generated)
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, target)
    return Built(target, run_ids, False, root)


def _starts_with(path: Path, stamp: str) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.readline().rstrip("\n") == stamp
    except (OSError, UnicodeDecodeError):
        return False
