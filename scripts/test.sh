#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: lint, then the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check server tests bench samples
.venv/bin/ruff format --check server tests bench samples
.venv/bin/python -m pytest "$@"
