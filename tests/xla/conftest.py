"""The xla tier: trnlens's agent on the REAL torch-xla, on its CPU PJRT device (PJRT_DEVICE=CPU),
in the cached venv that scripts/setup-xla.sh makes (scripts/test.sh runs it). No stand-in for
torch-xla; only the XLA-based torch_neuronx, which cannot be installed here, has one (standin/)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import components
from tests.targets.conftest import ssh_cache, test_host  # noqa: F401 - fixtures for test_xla_ssh

REPO = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).parent / "standin"


def xla_venv() -> Path:
    """The venv of scripts/setup-xla.sh, keyed by scripts/xla-versions.env."""
    if os.environ.get("TRNLENS_XLA_VENV"):
        return Path(os.environ["TRNLENS_XLA_VENV"])
    versions = dict(
        line.split("=", 1)
        for line in (REPO / "scripts" / "xla-versions.env").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    name = f"xla-venv-torch{versions['TORCH']}-xla{versions['TORCH_XLA']}"
    return Path.home() / ".cache" / "trnlens" / name


@pytest.fixture(scope="session")
def xla_python() -> Path:
    venv = xla_venv()
    if not (venv / ".trnlens-complete").exists():
        components.absent(f"the torch-xla venv {venv} (bash scripts/setup-xla.sh makes it)")
    return venv / "bin" / "python"


def xla_env(**extra: str) -> dict[str, str]:
    """The agent's environment: the CPU PJRT device, one thread (a shared 2-core machine)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XLA_IR_DEBUG")}
    env.update({"PJRT_DEVICE": "CPU", "OMP_NUM_THREADS": "1", **extra})
    return env
