"""The server process never loads torch (the e2e tests run every server under guard.py)."""

from __future__ import annotations

import subprocess
import sys

from .guard import TORCH_LOADED
from .session import HERE

GUARD = [sys.executable, str(HERE / "guard.py")]


def test_the_guard_catches_an_import_of_torch():
    done = subprocess.run([*GUARD, "--exec", "import torch.nn"], capture_output=True, text=True)
    assert done.returncode == TORCH_LOADED
    assert "the server imported torch" in done.stderr


def test_the_guard_lets_everything_else_through():
    done = subprocess.run([*GUARD, "--exec", "import json, sqlite3"], capture_output=True)
    assert done.returncode == 0


def test_building_the_server_and_its_features_imports_no_torch():
    code = (
        "import sys\n"
        "from trnlens.cli import build_parser\n"
        "from trnlens.lsp.server import create_server\n"
        "build_parser(); create_server()\n"
        "import trnlens.lsp.lenses, trnlens.lsp.hints, trnlens.lsp.hovers, trnlens.lsp.runs\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
