"""The report in headless Chromium (the browser the extension's e2e drives): it renders under its
own CSP without console errors, loads nothing else, zooms, sorts, and a click on an event shows
the event's details. The screenshot is kept as a test artifact (TRNLENS_REPORT_ARTIFACTS, default
extension/test/e2e/artifacts).

playwright-core comes from extension/test/e2e/node_modules, which scripts/extension-test.sh
installs (no browser download: Chromium is Debian's; scripts/test.sh installs them before pytest).
Without them the test is skipped and says why, except in CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from trnlens.report import build
from trnlens.store import Store

from tests import components
from tests.cli.conftest import REPO

E2E = REPO / "extension" / "test" / "e2e"
CHROMIUM = os.environ.get("TRNLENS_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("TRNLENS_REPORT_ARTIFACTS", E2E / "artifacts"))


def browser_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}"
    if not (E2E / "node_modules" / "playwright-core").is_dir():
        return "playwright-core is not installed (scripts/extension-test.sh installs it)"
    return None


def open_in_chromium(page: Path, screenshot: Path) -> dict:
    done = subprocess.run(
        ["node", str(E2E / "report-browser.mjs"), str(page), str(screenshot)],
        cwd=E2E, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("which", ["profile", "comparison"])
def test_the_report_renders_in_chromium_and_shows_an_events_details(runs, which):
    missing = browser_missing()
    if missing:
        components.absent(missing)
    run_id = (
        runs.profile["run_id"] if which == "profile" else runs.comparison["variants"][0]["run_id"]
    )
    with Store(runs.root) as store:
        built = build.write(store, build.select(store, run_id, runs.root), runs.root)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    seen = open_in_chromium(built.path, ARTIFACTS / f"report-{which}.png")
    assert seen["problems"] == []  # no console errors, no CSP violations, no script errors
    assert seen["foreign"] == []  # nothing but the page itself was requested
    assert seen["lanes"] == ["python", "dispatch", "runtime", "device", "memory"]
    assert "aten::pow" in seen["details"] and "samples/rmsnorm.py:17" in seen["details"]
    assert "input shapes" in seen["details"] and "[[4,512,2048],[]]" in seen["details"]
    assert seen["zoomed"] != seen["before"] and seen["reset"] == seen["before"]
    assert seen["descending"] == sorted(seen["descending"], reverse=True)
    assert seen["ascending"] == sorted(seen["ascending"])
    assert seen["where"] == "samples/rmsnorm.py:17"  # a browser shows where the line is
    assert (ARTIFACTS / f"report-{which}.png").stat().st_size > 10_000
    # In a 500 px side panel: the page never scrolls sideways (wide tables scroll in their own
    # box), the speed-up is in view, the axis labels do not overlap, no column says it twice.
    narrow = seen["narrow"]
    assert narrow["scrollWidth"] <= narrow["clientWidth"], narrow
    assert narrow["axisLabels"] >= 2 and narrow["overlaps"] == 0, narrow
    if which == "comparison":
        assert narrow["speedup"] and narrow["speedup"]["right"] <= narrow["clientWidth"], narrow
        # the time beside it too (issue 42: "12.3 ms unprofi" was cut at the panel's edge)
        assert narrow["headline"]["right"] <= narrow["clientWidth"], narrow
    # the per-line table whole: share bars shrink, a line's source wraps
    assert narrow["lines"] and all(t["scrollWidth"] <= t["clientWidth"] for t in narrow["lines"])
    for heads in narrow["opHeads"]:  # a CPU run: op time is CPU time, shown once
        assert heads == ["op", "calls", "self CPU", "CPU total", "input shapes"], heads
