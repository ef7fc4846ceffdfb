#!/usr/bin/env bash
# Builds, packages and tests the VS Code extension: npm deps, type check + esbuild bundle, the
# .vsix (vsce, offline), the unit tests (Node, `vscode` stubbed), then the end-to-end test in a
# real VS Code (code-server + headless Chromium). Works on a fresh Debian machine as root (it
# installs the apt packages it needs); needs Node >= 20 with npm, and an interpreter with trnlens
# and torch for the e2e (.venv/bin/python from scripts/setup.sh, or TRNLENS_PYTHON).
#
#   scripts/extension-test.sh              everything
#   scripts/extension-test.sh --skip-e2e   build, package and unit tests only
#   scripts/extension-test.sh --install-only   npm and apt dependencies only (scripts/test.sh
#                                          runs it first: the report's Chromium test needs them)
#
# Screenshots of the e2e go to extension/test/e2e/artifacts (TRNLENS_E2E_ARTIFACTS).
# A failed e2e names its code-server profile; TRNLENS_E2E_KEEP=1 keeps it, with the server's log
# at TRNLENS_E2E_SERVER_LOG (e.g. DEBUG) and the protocol trace at TRNLENS_E2E_TRACE (messages).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
EXT="$REPO/extension"
E2E="$EXT/test/e2e"

SKIP_E2E=0
INSTALL_ONLY=0
for arg in "$@"; do
    case "$arg" in
        --skip-e2e) SKIP_E2E=1 ;;
        --install-only) INSTALL_ONLY=1 ;;
        *) echo "usage: $0 [--skip-e2e | --install-only]" >&2; exit 2 ;;
    esac
done

STEP="start"
STEP_STARTED=$SECONDS
step() {
    STEP="$1"
    STEP_STARTED=$SECONDS
    echo "== extension-test: $STEP"
}
trap 'rc=$?; if ((rc)); then echo "extension-test: FAILED at step: $STEP (exit $rc)" >&2; fi' EXIT
done_step() { echo "   ($((SECONDS - STEP_STARTED)) s)"; }

step "check node and npm"
command -v node >/dev/null || { echo "node is not installed (Node >= 20 needed)" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm is not installed" >&2; exit 1; }
NODE_MAJOR=$(node -p 'process.versions.node.split(".")[0]')
if ((NODE_MAJOR < 20)); then
    echo "Node $(node --version) is too old: vsce and code-server 4.100.3 need Node 20 or newer" >&2
    exit 1
fi
done_step

# `npm ci` into DIR unless node_modules was installed from this very lock file (a stamp records
# it): a clean install takes minutes here (code-server), and an unchanged one can be kept.
npm_ci_once() {
    local dir=$1 stamp="$1/node_modules/.trnlens-installed-from-lock"
    if [[ -f "$stamp" ]] && cmp -s "$dir/package-lock.json" "$stamp"; then
        echo "   already installed from this package-lock.json"
        return
    fi
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$dir/package-lock.json" "$stamp"
}

step "npm ci (extension)"
npm_ci_once "$EXT"
done_step

if ((!INSTALL_ONLY)); then
    step "type check and bundle"
    (cd "$EXT" && npm run -s typecheck && node build.mjs --production)
    done_step

    step "package the .vsix (vsce, offline)"
    # vscode:prepublish type-checks and bundles again; --no-dependencies: the bundle holds them.
    (cd "$EXT" && npx vsce package --allow-missing-repository --skip-license --no-dependencies \
        -o trnlens.vsix)
    done_step

    step "unit tests"
    (cd "$EXT" && npm run -s test:unit)
    done_step
fi

if ((SKIP_E2E)); then
    echo "extension-test: e2e skipped (--skip-e2e)"
    exit 0
fi

step "apt packages for code-server and Chromium"
APT_PACKAGES=(build-essential pkg-config libkrb5-dev ripgrep chromium)
missing=()
for package in "${APT_PACKAGES[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "missing apt packages (install them as root): ${missing[*]}" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
done_step

step "npm ci (code-server 4.100.3, playwright-core)"
# @vscode/ripgrep (a code-server dependency) downloads rg from GitHub in its postinstall; seed its
# cache with Debian's rg instead, under the temp dir npm's scripts see.
RG_CACHE="${TMPDIR:-/tmp}/vscode-ripgrep-cache-1.15.11"
mkdir -p "$RG_CACHE"
tar czf "$RG_CACHE/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" -C "$(dirname "$(command -v rg)")" rg
# node-pty's build runs `npx node-gyp`, which waits for a "yes" without npm_config_yes;
# code-server's postinstall refuses to run as root unless npm_config_unsafe_perm is set (npm
# itself no longer knows that setting and warns about it: the warning is expected).
(export npm_config_yes=true npm_config_unsafe_perm=true; npm_ci_once "$E2E")
done_step

if ((INSTALL_ONLY)); then
    echo "extension-test: dependencies installed (--install-only)"
    exit 0
fi

step "e2e in code-server"
PYTHON=${TRNLENS_PYTHON:-$REPO/.venv/bin/python}
if ! "$PYTHON" -c "import trnlens, torch" 2>/dev/null; then
    echo "$PYTHON cannot import trnlens and torch: run scripts/setup.sh first (or set TRNLENS_PYTHON)" >&2
    exit 1
fi
(cd "$EXT" && TRNLENS_PYTHON="$PYTHON" TRNLENS_VSIX="$EXT/trnlens.vsix" \
    node --test --test-reporter=spec test/e2e/e2e.test.mjs test/e2e/ux.test.mjs \
        test/e2e/notebook.test.mjs test/e2e/walk.test.mjs test/e2e/settings.test.mjs)
done_step
echo "extension-test: all steps passed; screenshots in ${TRNLENS_E2E_ARTIFACTS:-$E2E/artifacts}"
