"""Neovim (0.7, headless) as a second real LSP client: lenses, running a lens, diagnostics, and a
raw textDocument/inlayHint request. Skipped, with the reason, where nvim is not installed
(CI installs it: ``apt-get install -y neovim``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.components import needs
from tests.lsp.session import SERVER, workspace

NVIM = shutil.which("nvim")
HERE = Path(__file__).parent

pytestmark = needs(None if NVIM else "nvim is not installed (apt-get install -y neovim)")


def test_neovim_shows_lenses_runs_one_and_gets_diagnostics_and_hints(tmp_path):
    root = workspace(tmp_path)
    out = tmp_path / "report.json"
    env = {
        **os.environ,
        "TRNLENS_OUT": str(out),
        "TRNLENS_FILE": str(root / "model.py"),
        "TRNLENS_ROOT": str(root),
        "TRNLENS_SERVER_CMD": json.dumps(SERVER),
        "XDG_STATE_HOME": str(tmp_path / "state"),  # nvim's LSP log goes here, not into ~
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    done = subprocess.run(
        [NVIM, "--headless", "--clean", "-u", "NONE", "-c", f"luafile {HERE / 'client.lua'}"],
        env=env, cwd=root, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.exists(), f"nvim wrote no report (exit {done.returncode}): {done.stderr[-2000:]}"
    report = json.loads(out.read_text("utf-8"))
    assert report["errors"] == [], report

    text = (root / "model.py").read_text("utf-8").splitlines()
    naive_def = next(i for i, line in enumerate(text) if "def rmsnorm_naive" in line)
    measured = {i for i, line in enumerate(text) if "x.pow(2)" in line or "torch.rsqrt" in line}

    assert report["lenses_before"]["rmsnorm_naive"] == {"title": "▶ Profile", "line": naive_def}
    assert "Block.forward" in report["lenses_before"]
    after = report["lenses_after"]["rmsnorm_naive"]["title"]
    assert after.startswith("▶ Profile · ") and "6 dispatches" in after
    # the run's one headline figure (trnlens.headline): the timing pass's median
    assert " unprofiled · 6 dispatches" in after and "device" not in after
    kinds = [p["kind"] for p in report["progress"]]
    assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds

    # Hotspots (Hint) beside the static analysis's TRN001 (a Warning, before any run).
    hotspots = [
        d
        for d in report["diagnostics"]
        if d["source"] == "trnlens" and not str(d.get("code") or "").startswith("TRN")
    ]
    assert hotspots and {d["line"] for d in hotspots} <= measured
    assert all(d["severity"] == 4 for d in hotspots)  # vim.diagnostic.severity.HINT
    analysis = [d for d in report["diagnostics"] if str(d.get("code") or "") == "TRN001"]
    assert analysis and all(d["severity"] == 2 for d in analysis)  # WARN

    assert report["hint_error"] is None, report["hint_error"]
    assert {h["position"]["line"] for h in report["hints"]} == measured
    assert all("dispatch" in h["label"] for h in report["hints"])
