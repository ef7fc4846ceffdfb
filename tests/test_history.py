"""History: comparable runs, the regression rule (threshold and measured spread), baselines at a
git ref, identities kept across renames (real git), and the per-op / per-line diff."""

from __future__ import annotations

import subprocess
from pathlib import Path

from trnlens import history
from trnlens.agent import sources
from trnlens.store import Store

from .test_store import fake_result

SOURCE = "import torch\n\n\ndef f(x):\n    return x.pow(2).mean(-1)\n"


def run(i: int, median: float, low: float, high: float, **extra) -> dict:
    result = fake_result(i, **extra)
    result["timing"] = {"median_us": median, "min_us": low, "max_us": high, "repeats": 20}
    return result


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return done.stdout.strip()


def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    return root


def f_hash(text: str = SOURCE, qualname: str = "f") -> str:
    return sources.source_hash(text, sources.find_definition(text, qualname))


def test_comparable_means_same_target_backend_mode_inputs_and_variant_kind():
    a = fake_result(1)
    assert history.comparable(a, fake_result(2))
    assert not history.comparable(a, fake_result(2, target="trn2"))
    assert not history.comparable(a, fake_result(2, backend="cuda"))
    assert not history.comparable(a, fake_result(2, mode="training"))
    assert not history.comparable(a, fake_result(2, inputs={"source": "directive:big"}))
    compiled = fake_result(2, variant={"label": "f (compiled)", "kind": "compiled"})
    assert not history.comparable(a, compiled)


def test_noisy_pair_within_their_spread_is_no_regression():
    base = run(1, 100.0, 70.0, 140.0)
    noisy = run(2, 125.0, 90.0, 160.0)  # +25 %, but the ranges are 70 and 70 µs wide
    change = history.change(base, noisy, threshold=0.1)
    assert round(change.ratio, 2) == 0.25 and change.spread_us == 70.0
    assert change.within_noise and not change.regression
    assert history.percent(change.ratio) == "+25%"


def test_regression_needs_both_the_threshold_and_the_spread():
    base = run(1, 100.0, 98.0, 102.0)
    assert history.change(base, run(2, 150.0, 148.0, 153.0), 0.1).regression
    # Beyond the spread but under the threshold: no regression.
    assert not history.change(base, run(2, 108.0, 107.0, 109.0), 0.1).regression
    # A speed-up is never a regression; the lens text uses a real minus sign.
    faster = history.change(base, run(2, 58.0, 57.0, 59.0), 0.1)
    assert not faster.regression and history.percent(faster.ratio) == "−42%"
    # Failed runs have no figure.
    assert history.change(base, fake_result(2, error={"kind": "user_code"})) is None


def test_without_a_timing_pass_device_time_is_compared_and_the_spread_is_unknown():
    a, b = fake_result(1, timing=None), fake_result(2, timing=None)
    a["device_time_per_step_us"], b["device_time_per_step_us"] = 100.0, 130.0
    change = history.change(a, b, 0.1)
    assert change.run_figure.basis == "device" and not change.spread_known
    assert change.regression and change.to_json()["spread_us"] is None


def test_previous_comparable_skips_other_settings_and_failures():
    runs = [
        fake_result(5),
        fake_result(4, backend="cuda"),
        fake_result(3, error={"kind": "user_code"}),
        fake_result(2),
        fake_result(1),
    ]
    assert history.previous_comparable(runs, runs[0])["run_id"] == runs[3]["run_id"]
    assert history.previous_comparable(runs, runs[4]) is None


def test_baseline_at_a_git_ref_uses_the_run_at_that_commit_or_its_nearest_ancestor(tmp_path):
    root = repo(tmp_path)
    (root / "model.py").write_text(SOURCE)
    git(root, "add", ".")
    git(root, "commit", "-qm", "one")
    first = git(root, "rev-parse", "HEAD")
    git(root, "tag", "v1")
    (root / "other.txt").write_text("x")
    git(root, "add", ".")
    git(root, "commit", "-qm", "two")
    second = git(root, "rev-parse", "HEAD")
    runs = [
        run(3, 150, 149, 151, git_commit=second),
        run(2, 120, 119, 121, git_commit=second),
        run(1, 100, 99, 101, git_commit=first),
    ]
    assert history.baseline(runs, runs[0])["run_id"] == runs[1]["run_id"]
    assert history.baseline(runs, runs[0], "v1", root)["run_id"] == runs[2]["run_id"]
    assert history.baseline(runs, runs[0], "main", root)["run_id"] == runs[1]["run_id"]
    assert history.baseline(runs, runs[0], "no-such-ref", root) is None


def test_a_git_rename_keeps_the_history(tmp_path):
    root = repo(tmp_path)
    (root / "old.py").write_text(SOURCE)
    git(root, "add", ".")
    git(root, "commit", "-qm", "one")
    with Store(root) as store:
        store.add(
            run(
                1,
                100,
                99,
                101,
                path="old.py",
                function={
                    **fake_result(1)["function"],
                    "path": "old.py",
                    "source_hash": "sha256:old",
                },
            )
        )
        git(root, "mv", "old.py", "new.py")
        # Staged only: git's rename detection already says where it came from.
        line = history.lineage(store, root, "new.py", "f")
        assert ("old.py", "f") in line.aliases
        git(root, "commit", "-qm", "move")
        line = history.lineage(store, root, "new.py", "f")
        assert line.aliases == [("new.py", "f"), ("old.py", "f")]
        assert [r["function"]["path"] for r in history.history(store, line)] == ["old.py"]


def test_the_same_source_hash_at_a_new_identity_keeps_the_history_without_git(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.py").write_text(SOURCE)
    fn = {**fake_result(1)["function"], "path": "a.py", "source_hash": f_hash()}
    with Store(root) as store:
        store.add(run(1, 100, 99, 101, function=fn))
        (root / "a.py").rename(root / "b.py")  # moved by hand: no git here
        line = history.lineage(store, root, "b.py", "f", current_hash=f_hash())
        assert line.aliases == [("b.py", "f"), ("a.py", "f")]
        # An identity that still exists is another function, however alike.
        (root / "a.py").write_text(SOURCE)
        line = history.lineage(store, root, "b.py", "f", current_hash=f_hash())
        assert line.aliases == [("b.py", "f")]


def test_diff_per_op_and_per_line():
    a = run(1, 100, 99, 101)
    b = run(2, 150, 149, 151)
    a["ops"] = [{"name": "aten::pow", "calls": 1, "self_cpu_us": 5, "self_device_us": 5,
                 "cpu_total_us": 5, "device_total_us": 5, "input_shapes": []}]  # fmt: skip
    b["ops"] = [{**a["ops"][0], "self_device_us": 9},
                {**a["ops"][0], "name": "aten::mul", "self_device_us": 2}]  # fmt: skip
    a["lines"] = [{"path": "model.py", "line": 3, "cpu_us": 5, "device_us": 5, "dispatches": 2}]
    b["lines"] = [{**a["lines"][0], "device_us": 11, "dispatches": 3}]
    report = history.diff(a, b, 0.2)
    assert report["regression"] and report["comparable"]
    assert report["change"]["change_pct"] == 50.0
    ops = {op["name"]: op for op in report["ops"]}
    assert ops["aten::pow"]["self_device_us"]["delta"] == 4
    assert ops["aten::mul"]["self_device_us"] == {"a": None, "b": 2, "delta": None, "pct": None}
    assert report["lines"][0]["device_us"]["delta"] == 6
    assert report["lines"][0]["dispatches"] == {"a": 2, "b": 3, "delta": 1, "pct": 50.0}


def test_a_change_within_either_runs_spread_is_no_change():
    base = run(1, 100.0, 95.0, 140.0)  # 45 µs wide
    later = run(2, 130.0, 128.0, 132.0)  # +30 %, narrow, but within the base's spread
    found = history.change(base, later, 0.1)
    assert found.spread_us == 45.0 and found.verdict == "no change" and not found.regression
    # over the threshold: said "within noise", never "no change (+30%)"
    assert history.change_text(found.to_json()) == "+30% within noise"


def test_a_slowdown_measured_on_a_busy_machine_is_noisy_not_a_regression():
    base = run(1, 100.0, 98.0, 102.0)
    busy = run(2, 784.0, 780.0, 790.0, warnings=["the machine is busy (load 9.0 on 2 cores)"])
    found = history.change(base, busy, 0.1)
    assert found.verdict == "noisy" and not found.regression
    assert found.to_json()["unreliable"] == [busy["run_id"]]
    assert history.change_text(found.to_json()) == "+684% noisy"
    # A timing pass that spread over more than half its median is as unreliable.
    wide = run(3, 784.0, 400.0, 900.0)
    assert history.change(base, wide, 0.1).verdict == "noisy"
    # The same figures on a quiet machine are a regression; a speed-up says so.
    assert history.change(base, run(4, 784.0, 780.0, 790.0), 0.1).verdict == "regression"
    assert history.change(base, run(5, 50.0, 49.0, 51.0), 0.1).verdict == "faster"


def test_diff_matches_lines_by_their_text_across_an_edit():
    a = run(1, 100, 99, 101)
    b = run(2, 100, 99, 101)
    a["lines"] = [
        {"path": "m.py", "line": 5, "cpu_us": 1, "device_us": 40, "dispatches": 2,
         "text": "v = x.pow(2).mean(-1)"},
        {"path": "m.py", "line": 6, "cpu_us": 1, "device_us": 60, "dispatches": 4,
         "text": "return x * torch.rsqrt(v) * w"},
    ]  # fmt: skip
    # Two lines were added above: the same lines are now 7 and 8, and line 5 is new code.
    b["lines"] = [
        {**a["lines"][0], "line": 7, "device_us": 41},
        {**a["lines"][1], "line": 8},
        {"path": "m.py", "line": 5, "cpu_us": 1, "device_us": 3, "dispatches": 1,
         "text": "x = x.float()"},
    ]  # fmt: skip
    report = history.diff(a, b, 0.1)
    assert report["lines_matched_by"] == "content"
    by_text = {line["text"]: line for line in report["lines"]}
    moved = by_text["v = x.pow(2).mean(-1)"]
    assert (moved["line_a"], moved["line"]) == (5, 7)
    assert moved["device_us"]["delta"] == 1 and moved["dispatches"]["delta"] == 0
    assert by_text["x = x.float()"]["device_us"] == {"a": None, "b": 3, "delta": None, "pct": None}
    assert [line["line"] for line in report["lines"]] == [5, 7, 8]
    # A run stored before lines carried their text: matched by number, and said so.
    for entry in a["lines"]:
        del entry["text"]
    assert history.diff(a, b, 0.1)["lines_matched_by"] == "number"


def test_entries_pair_each_run_with_its_previous_comparable_and_rows_share_their_keys(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    other = {**fake_result(2)["function"], "path": "model.py"}
    with Store(root) as store:
        store.add(run(1, 100, 99, 101))
        store.add(run(2, 300, 299, 301, function=other, mode="training"))  # not comparable
        store.add(run(3, 200, 199, 201))
        line = history.lineage(store, root, "model.py", "f")
        found = history.entries(store, line, threshold=0.1)
    assert [e.run["timing"]["median_us"] for e in found] == [200, 300, 100]  # newest first
    newest, training, oldest = found
    assert newest.change is not None and newest.change.base["timing"]["median_us"] == 100
    assert training.change is None and oldest.change is None
    row = newest.row(extra="x")
    assert list(row)[:7] == ["run_id", "created_at", "identity", "git_commit", "target",
                             "backend", "mode"]  # fmt: skip
    assert list(row)[7:] == ["headline", "headline_us", "extra", "change"]
    assert row["identity"] == "model.py::f" and row["change"]["verdict"] == "regression"


def test_vs_previous_compares_the_headline_the_lens_shows():
    """The lens showed "1.13 ms CPU (ops)" beside a change of the unprofiled medians: the
    figure compared is trnlens.headline's, whatever the profiler's overhead."""
    from trnlens.headline import headline

    base = run(1, 1_440.0, 1_400.0, 1_500.0)
    later = run(2, 1_540.0, 1_500.0, 1_600.0)
    later["stability"] = {"profiler_overhead": 1.1}  # a calm profile: once another figure
    found = history.change(base, later)
    assert found.base_figure.median_us == headline(base).time_us == 1_440.0
    assert found.run_figure.median_us == headline(later).time_us == 1_540.0


def test_a_change_in_dispatches_is_always_a_change_whatever_the_time_noise():
    base = run(1, 1_440.0, 1_000.0, 2_000.0, dispatches_per_step=131)
    later = run(2, 1_540.0, 1_000.0, 2_000.0, dispatches_per_step=151)
    found = history.change(base, later)
    assert found.verdict == "no change" and found.within_noise  # the time: within noise
    assert found.dispatches_changed and found.changed
    as_json = found.to_json()
    assert as_json["dispatches"] == [131, 151] and as_json["dispatches_changed"]
    text = history.change_text(as_json)
    assert text == "no change in time (+7%) · 131 → 151 dispatches"
    assert not text.startswith("no change (")
    # the same dispatches: a plain "no change"
    same = history.change(base, run(3, 1_540.0, 1_000.0, 2_000.0, dispatches_per_step=131))
    assert not same.dispatches_changed and not same.changed
    assert history.change_text(same.to_json()) == "no change (+7%)"
    # beyond the noise: the verdict, and the dispatches after it
    narrow = run(4, 1_440.0, 1_430.0, 1_450.0, dispatches_per_step=131)
    faster = history.change(narrow, run(5, 500.0, 490.0, 510.0, dispatches_per_step=20))
    assert history.change_text(faster.to_json()) == "−65% faster · 131 → 20 dispatches"
