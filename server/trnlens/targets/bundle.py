"""The agent as one file: a zipapp of ``trnlens/agent/`` under the package name ``trnlens_agent``.

One file is what goes over SSH to a host where trnlens is not installed, and locally it proves
the agent stands alone (it cannot reach the rest of trnlens from inside the zip). The bundle is
cached by the hash of its sources, so an upgrade of trnlens ships a new one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import trnlens.agent

AGENT_DIR = Path(trnlens.agent.__file__).parent
PACKAGE = "trnlens_agent"
MAIN = f"from {PACKAGE}.main import main\n\nraise SystemExit(main())\n"


def agent_sources() -> list[Path]:
    return sorted(p for p in AGENT_DIR.rglob("*.py") if "__pycache__" not in p.parts)


def bundle_hash() -> str:
    digest = hashlib.sha256()
    for path in agent_sources():
        digest.update(path.relative_to(AGENT_DIR).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "trnlens"


def short_temp_dir() -> Path:
    """The temporary directory for unix sockets: $TMPDIR when short, else /tmp (a socket path,
    ours plus what ssh appends while it binds, must stay under 108 bytes)."""
    base = tempfile.gettempdir()
    return Path(base if len(base) <= 40 else "/tmp")


def build(directory: Path | None = None) -> Path:
    """Returns the path of the bundle for the current sources, building it when missing."""
    directory = directory or cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"trnlens-agent-{bundle_hash()}.pyz"
    if target.exists():
        return target
    fd, temp = tempfile.mkstemp(dir=directory, suffix=".pyz.tmp")
    os.close(fd)
    with zipfile.ZipFile(temp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("__main__.py", MAIN)
        for path in agent_sources():
            if path.name == "__main__.py" and path.parent == AGENT_DIR:
                continue
            arcname = f"{PACKAGE}/{path.relative_to(AGENT_DIR).as_posix()}"
            archive.writestr(arcname, path.read_bytes())
    os.replace(temp, target)  # concurrent builders race harmlessly: same content
    return target
