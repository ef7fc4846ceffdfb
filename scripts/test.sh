#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: lint, types, then the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# npm and apt dependencies of the extension's tests (code-server, playwright-core, Chromium):
# pytest's report test drives Chromium too, and in CI nothing may be skipped for want of them.
bash scripts/extension-test.sh --install-only
# The real torch-xla (torch 2.8.0 + torch-xla 2.8.0, cached outside the repository, ~7 GB, ~2-6
# minutes once) for tests/xla/: the XLA backend runs on its CPU PJRT device.
bash scripts/setup-xla.sh
.venv/bin/ruff check server tests bench samples
.venv/bin/ruff format --check server tests bench samples
# The type checker on server/trnlens (settings: [tool.mypy] in pyproject.toml): no error allowed.
.venv/bin/mypy server/trnlens
.venv/bin/python -m pytest "$@"
