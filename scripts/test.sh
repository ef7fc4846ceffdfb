#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: lint, types, then the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# npm and apt dependencies of the extension's tests (code-server, playwright-core, Chromium):
# pytest's report test drives Chromium too, and in CI nothing may be skipped for want of them.
bash scripts/extension-test.sh --install-only
.venv/bin/ruff check server tests bench samples
.venv/bin/ruff format --check server tests bench samples
# The type checker on server/trnlens (settings: [tool.mypy] in pyproject.toml): no error allowed.
.venv/bin/mypy server/trnlens
.venv/bin/python -m pytest "$@"
