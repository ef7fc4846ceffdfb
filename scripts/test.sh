#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: lint, then the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# npm and apt dependencies of the extension's tests (code-server, playwright-core, Chromium):
# pytest's report test drives Chromium too, and in CI nothing may be skipped for want of them.
bash scripts/extension-test.sh --install-only
.venv/bin/ruff check server tests bench samples
.venv/bin/ruff format --check server tests bench samples
.venv/bin/python -m pytest "$@"
