#!/usr/bin/env bash
# Sets up everything trnlens's tests need on a fresh Debian machine (run as root for apt), then
# creates .venv with trnlens (editable) and the pinned CPU torch from constraints.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(neovim git openssh-server openssh-client iproute2 procps)
missing=()
for package in "${APT_PACKAGES[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "setup: missing apt packages (tests needing them skip): ${missing[*]}" >&2
    fi
fi

PYTHON=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# torch is pinned by the constraints file only: never a runtime dependency of trnlens.
.venv/bin/python -m pip install -q -c constraints.txt torch -e ".[dev]"
# Model libraries the rule-precision tests read as text (tests/analysis/labels): wheels only, no
# dependencies, never installed.
.venv/bin/python -m pip download -q --no-deps --require-hashes -d .venv/wheels \
    -r tests/analysis/labels/wheels.txt
