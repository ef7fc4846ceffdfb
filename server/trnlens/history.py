"""History: a function's runs over time, what is comparable, before/after, and regressions.

Runs are **comparable** when they measured the same thing the same way: same target, backend,
mode, inputs, and the same kind of variant (the function itself, compiled, or a rewritten source).
The figure compared is the run's headline (trnlens.headline: the timing pass's median, measured
without the profiler, or the profiled device time per step when a run has no timing pass): the
figure the lens shows beside "vs previous". A change in dispatches per step is a change whatever
the time's noise: every verdict text says it ("no change in time (+8%, within noise) · 131 → 151
dispatches"), never a bare "no change".

The regression rule (one place, used by the lens, the diagnostics, ``trnlens history`` and
``trnlens diff``): a run is a regression against its baseline when its median is slower by more
than ``threshold`` (a share: 0.1 = 10 %) **and** by more than each run's measured spread (its
min-max range: ``max(base.max - base.min, run.max - run.min)``), and neither run says its timing
was unreliable (a timing spread above half its median, or a machine busier than its cores):
then the verdict is "noisy", a slowdown that no measurement here can confirm. A difference within
the spread of two reliable runs is "no change" (said "within noise", never "no change" beside a
change over the threshold); two reliable runs' spreads are each under half their median, so that
covers at most +100% / −50%. Without a timing pass on both sides the spread is unknown and
counted as 0 (the report says so).

Identity across renames: a function's history is the runs of ``path::qualname`` plus those of the
identities it used to have: earlier paths of the file by git's rename detection
(``git log --follow``), and identities that no longer exist in the workspace whose runs measured
the same source hash as this function's runs or its current source.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from trnlens.agent import sources
from trnlens.headline import UNPROFILED
from trnlens.headline import headline as run_headline
from trnlens.store import Store

DEFAULT_THRESHOLD = 0.1


# -- comparability and the figure compared


def comparable_key(run: dict) -> tuple:
    variant = run.get("variant") or {}
    kind = variant.get("kind") or "function"
    return (
        run.get("target"),
        run.get("backend"),
        run.get("mode"),
        json.dumps(run.get("inputs"), sort_keys=True),
        kind,
        variant.get("source_hash") if kind == "source" else None,
    )


def comparable(a: dict, b: dict) -> bool:
    return comparable_key(a) == comparable_key(b)


@dataclass(frozen=True)
class Figure:
    """The figure compared for one run: the median, with its measured range when known."""

    median_us: float
    min_us: float | None = None
    max_us: float | None = None
    basis: str = "timing"  # "timing" or "device" (no timing pass: profiled device time)

    @property
    def spread_us(self) -> float | None:
        if self.min_us is None or self.max_us is None:
            return None
        return max(0.0, self.max_us - self.min_us)


def figure(run: dict) -> Figure | None:
    """The run's headline (trnlens.headline) with its timing range when it is the median."""
    if run.get("error"):
        return None
    shown = run_headline(run)
    if shown.time_us is None:
        return None
    if shown.basis == UNPROFILED:
        timing = run.get("timing") or {}
        return Figure(shown.time_us, timing.get("min_us"), timing.get("max_us"))
    return Figure(shown.time_us, None, None, "device")


def dispatches(run: dict) -> float | None:
    value = run.get("dispatches_per_step")
    return None if value is None else float(value)


@dataclass(frozen=True)
class Change:
    """``run`` against ``base``: relative change of the median and the regression verdict."""

    base: dict
    run: dict
    base_figure: Figure
    run_figure: Figure
    threshold: float

    @property
    def delta_us(self) -> float:
        return self.run_figure.median_us - self.base_figure.median_us

    @property
    def ratio(self) -> float:
        """Relative change: +0.25 is 25 % slower, -0.42 is 42 % faster."""
        base = self.base_figure.median_us
        return self.delta_us / base if base > 0 else 0.0

    @property
    def spread_us(self) -> float:
        """The wider of the two runs' min-max ranges: a change must exceed both."""
        base, run = self.base_figure.spread_us, self.run_figure.spread_us
        if base is None or run is None:
            return 0.0
        return max(base, run)

    @property
    def spread_known(self) -> bool:
        return self.base_figure.spread_us is not None and self.run_figure.spread_us is not None

    @property
    def within_noise(self) -> bool:
        return abs(self.delta_us) <= self.spread_us

    @property
    def noisy(self) -> bool:
        """Whether either run says its timing cannot be trusted (see :func:`unreliable`)."""
        return bool(unreliable(self.base) or unreliable(self.run))

    @property
    def verdict(self) -> str:
        """'regression', 'faster', 'no change' (within the threshold, or within the runs'
        spread) or 'noisy' (beyond the threshold, measured when either run's timing was
        unreliable: its spread is no test then, so no "within noise" covers a +768%)."""
        if abs(self.ratio) <= self.threshold:
            return "no change"
        if self.noisy:
            return "noisy"
        if abs(self.delta_us) <= self.spread_us:
            return "no change"
        return "regression" if self.delta_us > 0 else "faster"

    @property
    def under_threshold(self) -> bool:
        return abs(self.ratio) <= self.threshold

    def unreliable_why(self, against: str = "previous") -> str | None:
        """Why the pair's timing is unreliable (the run's reason first), or None."""
        why = unreliable(self.run)
        if why:
            return why
        why = unreliable(self.base)
        return f"the {against} run: {why}" if why else None

    @property
    def regression(self) -> bool:
        return self.verdict == "regression"

    @property
    def dispatch_pair(self) -> tuple[float, float] | None:
        """(base, run) dispatches per step when both runs counted them."""
        a, b = dispatches(self.base), dispatches(self.run)
        return None if a is None or b is None else (a, b)

    @property
    def dispatches_changed(self) -> bool:
        """Whether the dispatches per step differ: a count, not a timing, so no noise hides it
        (131 → 151 read "no change vs previous" when only the time was compared)."""
        pair = self.dispatch_pair
        return pair is not None and round(pair[0]) != round(pair[1])

    @property
    def changed(self) -> bool:
        """Whether anything changed: the time beyond the noise, or the dispatches."""
        return self.verdict != "no change" or self.dispatches_changed

    def to_json(self) -> dict:
        return {
            "base": self.base["run_id"],
            "run": self.run["run_id"],
            "base_median_us": self.base_figure.median_us,
            "run_median_us": self.run_figure.median_us,
            "basis": self.run_figure.basis,
            "delta_us": self.delta_us,
            "change_pct": 100 * self.ratio,
            "spread_us": self.spread_us if self.spread_known else None,
            "threshold_pct": 100 * self.threshold,
            "regression": self.regression,
            "verdict": self.verdict,
            "dispatches": list(self.dispatch_pair) if self.dispatch_pair else None,
            "dispatches_changed": self.dispatches_changed,
            "unreliable": [r["run_id"] for r in (self.base, self.run) if unreliable(r)],
        }


# Above this timing spread ((max - min) / median, stability.WIDE_SPREAD) a run's timing is noise.
WIDE_SPREAD = 0.5


def unreliable(run: dict) -> str | None:
    """Why a run's timing cannot support a verdict, or None: its timing pass spread wider than
    half its median, or it ran on a machine busier than its cores (both said in its warnings)."""
    if any(str(w).startswith("the machine is busy") for w in run.get("warnings") or []):
        return "the machine was busy"
    timing = run.get("timing") or {}
    median = timing.get("median_us")
    if median and timing.get("min_us") is not None and timing.get("max_us") is not None:
        if (timing["max_us"] - timing["min_us"]) / median > WIDE_SPREAD:
            return "its timing spread widely"
    return None


def change_text(found: dict) -> str:
    """A change as the CLI says it: '+50% REGRESSION', '−42% faster', 'no change (+3%)' (under
    the threshold), '+30% within noise' (over it, within the runs' spread) or '+684% noisy'
    (the JSON of :meth:`Change.to_json`), with ' · 131 → 151 dispatches' after it, and 'no
    change in time', when the dispatches changed."""
    pct = percent(found["change_pct"] / 100)
    verdict = found.get("verdict") or ("regression" if found.get("regression") else "no change")
    extra = dispatch_text(found)
    within = abs(found["change_pct"]) > found.get("threshold_pct", 0)  # the spread, not the bar
    if verdict == "regression":
        text = f"{pct} REGRESSION"
    elif verdict == "no change" and within:
        text = f"{pct} within noise"
    elif verdict == "no change":
        text = f"no change in time ({pct})" if extra else f"no change ({pct})"
    else:
        text = f"{pct} {verdict}"
    return f"{text} · {extra}" if extra else text


def dispatch_text(found: dict) -> str:
    """'131 → 151 dispatches' when a change's dispatches per step changed, else ''."""
    pair = found.get("dispatches")
    if not found.get("dispatches_changed") or not pair:
        return ""
    return f"{pair[0]:g} → {pair[1]:g} dispatches"


def change(base: dict, run: dict, threshold: float = DEFAULT_THRESHOLD) -> Change | None:
    """None when either run failed or has no figure."""
    a, b = figure(base), figure(run)
    if a is None or b is None:
        return None
    return Change(base, run, a, b, threshold)


def percent(ratio: float) -> str:
    """'−42%' / '+15%' / '±0%' (a real minus sign, as the lens shows it)."""
    value = round(100 * ratio)
    if value == 0:
        return "±0%"
    return f"+{value}%" if value > 0 else f"−{-value}%"


# -- finding runs


def previous_comparable(runs: Iterable[dict], run: dict) -> dict | None:
    """The newest successful run older than ``run`` (``runs`` newest first) comparable to it."""
    key = (run.get("created_at") or "", run["run_id"])
    for other in runs:
        if other["run_id"] == run["run_id"] or other.get("error"):
            continue
        if (other.get("created_at") or "", other["run_id"]) >= key:
            continue
        if comparable(other, run):
            return other
    return None


def at_commits(runs: Iterable[dict], run: dict, commits: list[str]) -> dict | None:
    """The comparable run made at the first of ``commits`` (nearest first) that has one."""
    by_commit: dict[str, dict] = {}
    for other in runs:  # newest first: keep the newest run per commit
        commit = other.get("git_commit")
        if (
            commit
            and other["run_id"] != run["run_id"]
            and not other.get("error")
            and comparable(other, run)
        ):
            by_commit.setdefault(commit, other)
    for commit in commits:
        if commit in by_commit:
            return by_commit[commit]
    return None


def ref_commits(root: Path, ref: str, limit: int = 2000) -> list[str]:
    """The commits of ``ref`` and its ancestors, nearest first (empty when git cannot say)."""
    done = _git(root, "rev-list", f"--max-count={limit}", ref, "--")
    return done.split() if done else []


def baseline(
    runs: list[dict], run: dict, ref: str | None = None, root: Path | None = None
) -> dict | None:
    """The run to compare ``run`` against: the previous comparable run, or with ``ref`` the
    comparable run made at that git ref (else at its nearest ancestor that has one)."""
    if ref:
        if root is None:
            return None
        return at_commits(runs, run, ref_commits(root, ref))
    return previous_comparable(runs, run)


# -- identity across renames


@dataclass
class Lineage:
    """The identities whose runs belong to one function's history."""

    path: str
    qualname: str
    aliases: list[tuple[str, str]] = field(default_factory=list)  # (path, qualname), self first

    @property
    def identity(self) -> str:
        return f"{self.path}::{self.qualname}"


def git_paths(root: Path, path: str, limit: int = 50) -> list[str]:
    """Earlier paths of a tracked file by git's rename detection (newest first, ``path`` not
    included); staged renames (``git mv`` not yet committed) count too."""
    found: list[str] = []
    staged = _git(root, "diff", "--cached", "-M", "--name-status", "-z", "HEAD", "--")
    if staged:
        parts = staged.split("\0")
        i = 0
        while i < len(parts):
            status = parts[i]
            if status.startswith(("R", "C")) and i + 2 < len(parts):
                if parts[i + 2] == path:
                    found.append(parts[i + 1])
                i += 3
            else:
                i += 2
    current = found[-1] if found else path
    log = _git(root, "log", "--follow", "-M", f"--max-count={limit}", "--name-only",
               "--format=", "--", current)  # fmt: skip
    for line in (log or "").splitlines():
        line = line.strip()
        if line and line != path and line not in found:
            found.append(line)
    return found


def lineage(
    store: Store,
    root: Path,
    path: str,
    qualname: str,
    current_hash: str | None = None,
    exists: Callable[[str, str], bool] | None = None,
    use_git: bool = True,
) -> Lineage:
    """``path::qualname`` and the identities it had before (see the module's docstring).

    ``exists(path, qualname)`` says whether an identity is still defined in the workspace (an
    identity that still exists is a different function, however alike); the default reads the
    file from disk.
    """
    exists = exists or (lambda p, q: _defined(root, p, q))
    aliases: list[tuple[str, str]] = [(path, qualname)]
    if use_git:
        for old in git_paths(root, path):
            if (old, qualname) not in aliases and not exists(old, qualname):
                aliases.append((old, qualname))
    hashes = set(store.source_hashes(aliases))
    if current_hash:
        hashes.add(current_hash)
    seen = set(aliases)
    frontier = set(hashes)
    while frontier:  # follow chains: a -> b (same hash) -> c (b's other hashes)
        found = store.identities_with_hashes(sorted(frontier))
        frontier = set()
        for identity in found:
            if identity in seen or exists(*identity):
                continue
            seen.add(identity)
            aliases.append(identity)
            more = set(store.source_hashes([identity])) - hashes
            hashes |= more
            frontier |= more
    return Lineage(path, qualname, aliases)


def history(store: Store, line: Lineage, limit: int = 200) -> list[dict]:
    """Every run of the lineage, newest first."""
    runs: dict[str, dict] = {}
    for p, q in line.aliases:
        for run in store.runs(p, q, limit=limit):
            runs[run["run_id"]] = run
    ordered = sorted(runs.values(), key=lambda r: (r.get("created_at") or "", r["run_id"]))
    return ordered[::-1][:limit]


@dataclass(frozen=True)
class Entry:
    """One run of a function's history, with its change against the previous comparable run."""

    run: dict
    change: Change | None

    def row(self, **extra: object) -> dict:
        """The run as ``trnlens history --format json`` and the editor's history command list
        it: what both show, then each one's ``extra`` keys, then the change."""
        run, fn = self.run, self.run["function"]
        return {
            "run_id": run["run_id"],
            "created_at": run.get("created_at"),
            "identity": f"{fn['path']}::{fn['qualname']}",
            "git_commit": run.get("git_commit"),
            "target": run.get("target"),
            "backend": run.get("backend"),
            "mode": run.get("mode"),
            # the figure the lens shows and "change" compares (trnlens.headline)
            "headline": None if run.get("error") else run_headline(run).text,
            "headline_us": None if run.get("error") else run_headline(run).time_us,
            **extra,
            "change": self.change.to_json() if self.change else None,
        }


def entries(
    store: Store, line: Lineage, threshold: float = DEFAULT_THRESHOLD, limit: int = 200
) -> list[Entry]:
    """The lineage's runs, newest first, each with its change against the previous comparable
    run (the CLI's ``trnlens history`` and the editor's history command alike)."""
    runs = history(store, line, limit=limit)
    found = []
    for run in runs:
        base = previous_comparable(runs, run)
        found.append(Entry(run, change(base, run, threshold) if base else None))
    return found


def _defined(root: Path, path: str, qualname: str) -> bool:
    try:
        text = (root / path).read_text("utf-8")
        sources.find_definition(text, qualname, path)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, sources.DefinitionNotFound):
        return False
    return True


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


# -- diff: per op and per line


def diff(a: dict, b: dict, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """``b`` against ``a``: the headline figures, each op and each line, and the verdict."""
    headline = change(a, b, threshold)
    figures = {}
    for key in ("device_time_per_step_us", "cpu_time_per_step_us", "wall_time_per_step_us",
                "dispatches_per_step"):  # fmt: skip
        figures[key] = _pair(a.get(key), b.get(key))
    ops_a = {op["name"]: op for op in a.get("ops") or []}
    ops_b = {op["name"]: op for op in b.get("ops") or []}
    ops = []
    for name in sorted(set(ops_a) | set(ops_b)):
        before, after = ops_a.get(name, {}), ops_b.get(name, {})
        ops.append(
            {
                "name": name,
                "calls": _pair(before.get("calls"), after.get("calls")),
                "self_device_us": _pair(before.get("self_device_us"), after.get("self_device_us")),
                "self_cpu_us": _pair(before.get("self_cpu_us"), after.get("self_cpu_us")),
            }
        )
    ops.sort(key=lambda o: -abs(o["self_device_us"]["delta"] or 0))
    lines = _line_pairs(a.get("lines") or [], b.get("lines") or [])
    return {
        "a": _describe(a),
        "b": _describe(b),
        "comparable": comparable(a, b),
        "same_source": (a.get("function") or {}).get("source_hash")
        == (b.get("function") or {}).get("source_hash"),
        "change": headline.to_json() if headline else None,
        "regression": bool(headline and headline.regression),
        "figures": figures,
        "ops": ops,
        "lines": lines,
        "lines_matched_by": "content"
        if all(e.get("text") is not None for e in (a.get("lines") or []) + (b.get("lines") or []))
        else "number",
    }


def _line_key(entries: list[dict]) -> list[tuple]:
    """Each line's key: (path, its source text, which occurrence of that text) when the run
    recorded the text (schema 3), so a line keeps its figures when lines above it moved; else
    (path, line number)."""
    seen: dict[tuple, int] = {}
    keys = []
    for e in sorted(entries, key=lambda e: (e["path"], e["line"])):
        if e.get("text") is None:
            keys.append((e["path"], None, e["line"]))
            continue
        text_key = (e["path"], e["text"])
        seen[text_key] = seen.get(text_key, 0) + 1
        keys.append((e["path"], e["text"], seen[text_key]))
    return keys


def _line_pairs(entries_a: list[dict], entries_b: list[dict]) -> list[dict]:
    both_have_text = all(e.get("text") is not None for e in entries_a + entries_b)
    if not both_have_text:  # one run predates the text: numbers are all there is to match by
        entries_a = [{k: v for k, v in e.items() if k != "text"} for e in entries_a]
        entries_b = [{k: v for k, v in e.items() if k != "text"} for e in entries_b]
    ordered_a = sorted(entries_a, key=lambda e: (e["path"], e["line"]))
    ordered_b = sorted(entries_b, key=lambda e: (e["path"], e["line"]))
    by_a = dict(zip(_line_key(ordered_a), ordered_a, strict=True))
    by_b = dict(zip(_line_key(ordered_b), ordered_b, strict=True))
    pairs = []
    for key in sorted(set(by_a) | set(by_b), key=lambda k: (k[0], _line_of(k, by_a, by_b))):
        before, after = by_a.get(key, {}), by_b.get(key, {})
        pairs.append(
            {
                "path": key[0],
                "line": after.get("line", before.get("line")),  # where it is now (B)
                "line_a": before.get("line"),
                "text": key[1],
                "device_us": _pair(before.get("device_us"), after.get("device_us")),
                "dispatches": _pair(before.get("dispatches"), after.get("dispatches")),
            }
        )
    return pairs


def _line_of(key: tuple, by_a: dict, by_b: dict) -> int:
    return (by_b.get(key) or by_a.get(key) or {}).get("line") or 0


def _pair(before, after) -> dict:
    delta = after - before if before is not None and after is not None else None
    pct = 100 * delta / before if delta is not None and before else None
    return {"a": before, "b": after, "delta": delta, "pct": pct}


def _describe(run: dict) -> dict:
    fn = run.get("function") or {}
    return {
        "run_id": run["run_id"],
        "identity": f"{fn.get('path')}::{fn.get('qualname')}",
        "created_at": run.get("created_at"),
        "git_commit": run.get("git_commit"),
        "target": run.get("target"),
        "backend": run.get("backend"),
        "mode": run.get("mode"),
        "variant": (run.get("variant") or {}).get("label"),
        "time_basis": run.get("time_basis"),
        "source_hash": fn.get("source_hash"),
        "error": (run.get("error") or {}).get("kind"),
    }
