"""The VS Code extension, under the repository's one test command.

``scripts/extension-test.sh`` builds and packages the extension, runs its unit tests and the
end-to-end test in a real VS Code (code-server + headless Chromium); it is skipped only when Node
or npm is missing. The settings the extension contributes are checked against the server's own
table here, with no Node at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from trnlens import settings

from tests import components

REPO = Path(__file__).resolve().parent.parent
EXTENSION = REPO / "extension"
SCRIPT = REPO / "scripts" / "extension-test.sh"
MANIFEST = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
# Read by the extension itself, never sent to the server.
EXTENSION_ONLY = {"interpreter", "serverLogLevel", "trace.server"}


def contributed() -> dict[str, dict]:
    properties = MANIFEST["contributes"]["configuration"]["properties"]
    return {key.removeprefix("trnlens."): schema for key, schema in properties.items()}


def test_the_extension_contributes_every_server_setting_with_its_default():
    ours = {key: schema for key, schema in contributed().items() if key not in EXTENSION_ONLY}
    assert set(ours) == set(settings.DEFAULTS)
    for key, default in settings.DEFAULTS.items():
        assert ours[key]["default"] == default, key
        assert ours[key].get("description") or ours[key].get("markdownDescription"), key


def test_the_extension_offers_the_server_choices():
    schema = contributed()
    assert tuple(schema["backend"]["enum"]) == settings.BACKENDS
    assert tuple(schema["mode"]["enum"]) == settings.MODES


def test_settings_that_run_code_are_restricted_in_untrusted_workspaces():
    restricted = MANIFEST["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"]
    assert {"trnlens.interpreter", "trnlens.target", "trnlens.targets"} <= set(restricted)


@pytest.mark.slow
def test_extension_builds_packages_and_passes_unit_and_code_server_tests():
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        components.absent(f"{' and '.join(missing)} not installed: the extension is not tested")
    env = dict(os.environ)
    env.setdefault("TRNLENS_PYTHON", sys.executable)
    # code-server, its git and TypeScript helpers and the ripgrep cache write into TMPDIR and
    # leave sockets there: give them a short private one (unix socket paths stay under 108
    # bytes) that goes with the test.
    with tempfile.TemporaryDirectory(prefix="ext-") as scratch:
        env["TMPDIR"] = scratch
        done = subprocess.run(
            ["bash", str(SCRIPT)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
    output = done.stdout + done.stderr
    steps = [line for line in output.splitlines() if line.startswith(("== ", "extension-test:"))]
    assert done.returncode == 0, "\n".join(steps) + "\n...\n" + output[-6000:]
    assert "extension-test: all steps passed" in done.stdout
