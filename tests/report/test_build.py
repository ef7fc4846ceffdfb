"""Which runs a report shows, where it goes, reuse, and the `trnlens report` command."""

from __future__ import annotations

import json
import os

import pytest
from trnlens.report import build
from trnlens.store import Store

from tests.cli.conftest import trnlens


def ids(runs: list[dict]) -> list[str]:
    return [r["run_id"] for r in runs]


def test_select_by_id_prefix_function_result_file_or_latest(runs):
    variants = ids(runs.comparison["variants"])
    profile = runs.profile["run_id"]
    with Store(runs.root) as store:
        assert ids(build.select(store, profile, runs.root)) == [profile]
        assert ids(build.select(store, profile[:18], runs.root)) == [profile]
        # the function's latest run was the comparison's last variant: the whole comparison
        spec = f"{runs.root / 'samples/rmsnorm.py'}::rmsnorm_naive"
        assert ids(build.select(store, spec, runs.root)) == variants
        assert ids(build.select(store, None, runs.root)) == variants
        result = runs.root / ".trnlens" / "artifacts" / profile / "result.json"
        assert ids(build.select(store, str(result), runs.root)) == [profile]
        with pytest.raises(build.ReportError, match="no run match 'nope'"):
            build.select(store, "nope", runs.root)
        with pytest.raises(build.ReportError, match="no run of samples/rmsnorm.py::other"):
            build.select(store, f"{runs.root / 'samples/rmsnorm.py'}::other", runs.root)


def test_written_beside_the_artifacts_and_reused_until_the_page_changes(runs, tmp_path):
    with Store(runs.root) as store:
        selected = build.select(store, runs.profile["run_id"], runs.root)
        first = build.write(store, selected, runs.root, reuse=False)
        assert first.path == store.artifacts / runs.profile["run_id"] / "report.html"
        again = build.write(store, selected, runs.root)
        assert again.reused and again.path == first.path
        elsewhere = build.write(store, selected, runs.root, tmp_path / "out" / "r.html")
        assert not elsewhere.reused
        # links are relative to where the page is
        trace = store.artifacts / runs.profile["run_id"] / "trace.json"
        href = os.path.relpath(trace, elsewhere.path.parent)
        assert href.startswith("../") and f'href="{href}"' in elsewhere.path.read_text()


def test_a_bounded_step_says_it_was_truncated(runs, tmp_path):
    with Store(runs.root) as store:
        selected = build.select(store, runs.profile["run_id"], runs.root)
        built = build.write(store, selected, runs.root, tmp_path / "r.html", max_events=3)
    text = built.path.read_text()
    assert "the first 3 are drawn" in text and "left out (figures come from the whole run)" in text


def test_the_cli_prints_the_page_and_says_what_is_wrong(runs, tmp_path):
    done = trnlens("report", runs.profile["run_id"], "--output", str(tmp_path / "p.html"),
                   cwd=runs.root)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "p.html")
    assert "<svg" in (tmp_path / "p.html").read_text()
    done = trnlens("report", "samples/rmsnorm.py::rmsnorm_naive", cwd=runs.root)
    assert done.returncode == 0 and done.stdout.strip().endswith("comparison.html")
    done = trnlens("report", "nope", cwd=runs.root)
    assert done.returncode == 2 and "no run match 'nope'" in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    done = trnlens("report", cwd=empty)
    assert done.returncode == 2 and "no runs stored" in done.stderr
    assert not (empty / ".trnlens").exists()  # asking wrote nothing


def test_a_stored_result_json_of_a_comparison_shows_it_whole(runs, tmp_path):
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(runs.comparison))
    with Store(runs.root) as store:
        assert ids(build.select(store, str(path), runs.root)) == ids(runs.comparison["variants"])


def test_a_run_of_an_unsaved_buffer_with_lines_added_above_shows_its_lines_where_it_counted(
    tmp_path,
):
    """Issue 42: the run measured the editor's buffer, 3 lines longer above the function than the
    saved file: the same function, numbered as the run counted it; a changed one says so."""
    from trnlens.agent import sources as agent_sources
    from trnlens.report.views import _Sources

    saved = "import torch\n\ndef f(x):\n    return x * 2\n"
    (tmp_path / "m.py").write_text(saved, "utf-8")
    definition = agent_sources.find_definition(saved, "f", "m.py")
    run = {"function": {"path": "m.py", "qualname": "f", "line": 6,
                        "source_hash": agent_sources.source_hash(saved, definition)}}  # fmt: skip
    shown, note = _Sources(tmp_path).function(run)
    assert [(s.number, s.text) for s in shown] == [(6, "def f(x):"), (7, "    return x * 2")]
    assert note is None
    run["function"]["source_hash"] = "sha256:other"
    shown, note = _Sources(tmp_path).function(run)
    assert [s.number for s in shown] == [3, 4] and "changed since this run" in note
