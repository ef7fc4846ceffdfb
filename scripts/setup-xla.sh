#!/usr/bin/env bash
# Installs the real torch-xla (the library the XLA-based torch-neuronx 2.x is built on) into a cached
# virtual environment OUTSIDE the repository, keyed by the versions, for tests/xla/ (PJRT_DEVICE=CPU).
#
# Versions: torch 2.8.0 + torch-xla 2.8.0, exactly what optimum-neuron 0.4.5 pins (torch==2.8.0,
# torch-neuronx==2.8.0.2.10.*, which is built on torch-xla 2.8): the stack its users run.
# Nothing of trnlens goes in: the agent is standalone and the tests run it with --python pointing here.
#
# Cached: skipped when the venv is complete (a marker written after a successful import check).
# Prints the time and disk it added. The torch wheel from the public index pulls the CUDA libraries
# (about 7 GB in all); `--no-deps` would break `import torch`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=xla-versions.env
source scripts/xla-versions.env
TORCH_VERSION=$TORCH
TORCH_XLA_VERSION=$TORCH_XLA
TRANSFORMERS=${TRANSFORMERS:?scripts/xla-versions.env names TRANSFORMERS}
# Not under XDG_CACHE_HOME: the test suite points that at its own temporary directory.
VENV=${TRNLENS_XLA_VENV:-$HOME/.cache/trnlens/xla-venv-torch$TORCH_VERSION-xla$TORCH_XLA_VERSION}
MARKER=$VENV/.trnlens-complete
PYTHON=${PYTHON:-python3}

# transformers is added to a complete venv on its own (a venv made before it was pinned keeps
# its 7 GB of torch): its own marker, keyed by its version.
TRANSFORMERS_MARKER=$VENV/.trnlens-transformers-$TRANSFORMERS
add_transformers() {
    "$VENV/bin/python" -m pip install -q "transformers==$TRANSFORMERS" \
        2> >(grep -v "^WARNING: Location" >&2)
    "$VENV/bin/python" -c "import transformers; print('setup-xla: transformers', transformers.__version__)"
    touch "$TRANSFORMERS_MARKER"
}
if [[ -f $MARKER ]]; then
    [[ -f $TRANSFORMERS_MARKER ]] || add_transformers
    echo "setup-xla: $VENV is ready (cached)"
    exit 0
fi
start=$(date +%s)
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip 2> >(grep -v "^WARNING: Location" >&2)
# (grep: this machine's pip config names local indexes that lack these; its warnings are noise)
"$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION" "torch-xla==$TORCH_XLA_VERSION" \
    2> >(grep -v "^WARNING: Location" >&2)
# The import check that marks the venv complete: a graph compiled and run on the CPU PJRT device.
PJRT_DEVICE=CPU "$VENV/bin/python" - <<'PY'
import torch
import torch_xla

t = torch.ones(3, device=torch_xla.device()) * 2
torch_xla.sync()
assert t.cpu().tolist() == [2.0, 2.0, 2.0]
print(f"setup-xla: torch {torch.__version__}, torch_xla {torch_xla.__version__} run on PJRT CPU")
PY
touch "$MARKER"
add_transformers
echo "setup-xla: installed $VENV in $(($(date +%s) - start)) s, $(du -sh "$VENV" | cut -f1) on disk"
