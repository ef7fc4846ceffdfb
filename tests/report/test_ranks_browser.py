"""A 2-rank run's report: one lane group per rank on one axis, the slowest rank marked, a wait's
details on click, in headless Chromium (screenshot kept as an artifact: report-ranks.png)."""

from __future__ import annotations

import json
import subprocess

import pytest
from trnlens.report import build
from trnlens.store import Store

from tests import components
from tests.ranks.conftest import IMBALANCED, profile
from tests.report.test_browser import ARTIFACTS, E2E, browser_missing


@pytest.fixture(scope="module")
def ranked_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranks")
    (root / "pyproject.toml").write_text("")
    (root / "ranks_step.py").write_text(IMBALANCED.lstrip("\n"))
    result = profile(root, "step", 2)
    with Store(root) as store:
        built = build.write(store, build.select(store, result["run_id"], root), root)
    return result, built.path


def test_the_report_has_a_lane_group_per_rank_with_the_slowest_marked(ranked_report):
    result, path = ranked_report
    page = path.read_text("utf-8")
    assert result["slowest_rank"] == 1
    assert 'class="timeline ranks"' in page
    assert '<text class="group" x="4"' in page and "rank 0</text>" in page
    assert '<text class="group straggler" x="4"' in page and "rank 1 ◀ slowest</text>" in page
    assert page.count('class="ev gap"') >= 1  # rank 0's waits in all_reduce
    assert 'href="ranks-trace.json">every rank' in page  # the merged trace, for Perfetto
    # each rank's memory peak, and the rank nearest its limit named under the table; or, where
    # torch's reading of a rank's memory profile failed twice (its "duplicate outputs"
    # assertion, now and then on a loaded machine), that rank's warning and no rank named
    assert ">peak memory</th><th>host</th>" in page
    assert page.count('<td class="num">') >= 2 * 6
    failed = [w for w in result["warnings"] if "the memory pass failed" in w]
    if all(row["peak_memory_bytes"] for row in result["ranks"]):
        assert " nearest its memory limit: peak " in page
    else:
        assert failed and " nearest its memory limit" not in page, result["warnings"]


def test_the_ranks_section_in_chromium(ranked_report):
    missing = browser_missing()
    if missing:
        components.absent(missing)
    _, path = ranked_report
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-ranks.png"
    done = subprocess.run(
        ["node", str(E2E / "report-ranks.mjs"), str(path), str(shot)],
        cwd=E2E, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["problems"] == [] and seen["foreign"] == []
    assert seen["groups"] == ["rank 0", "rank 1 ◀ slowest"]
    assert seen["marked"] == ["rank 1 ◀ slowest"]
    assert seen["lanes"] == ["steps", "work", "collectives"]
    assert "wait in all_reduce" in seen["details"] and "ranks_step.py:" in seen["details"]
    assert seen["headline"].startswith("2 ranks · slowest rank 1 (busy +")
    assert shot.stat().st_size > 10_000
