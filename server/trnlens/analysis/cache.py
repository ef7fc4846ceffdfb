"""``trnlens check``'s cache: a file whose bytes were analysed before is not analysed again.

Like ruff's cache, an entry is keyed by the file's content (sha256 of its bytes) and the file's
path (findings carry it), and the whole cache by what decides the findings: trnlens's version, a
hash of the analysis code itself (so an edited rule in a development install never serves stale
findings), and the selected and ignored codes. It lives in the user's cache directory
(``$XDG_CACHE_HOME/trnlens/check``), never in the repository: a repository cannot plant entries.

One cache file per key and project folder. Writes are atomic (a temporary file, then
``os.replace``) after merging with what is on disk, so concurrent runs never read a torn file; at
worst one run's new entries are lost, which costs a re-analysis and never a wrong answer. A file
that cannot be read back (truncated, from another Python) counts as empty.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import trnlens
import trnlens.analysis
from trnlens.analysis.atomic import write_atomic
from trnlens.analysis.model import Finding
from trnlens.targets.bundle import cache_dir

ANALYSIS_DIR = Path(trnlens.analysis.__file__).parent
# Bump when the file's layout changes.
FORMAT = 2  # 2: findings in notebooks carry their cell


@cache
def code_fingerprint() -> str:
    """sha256 of the analysis package's sources: the rules' code is part of the key."""
    digest = hashlib.sha256()
    for path in sorted(ANALYSIS_DIR.rglob("*.py")):
        digest.update(path.relative_to(ANALYSIS_DIR).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def settings_key(select: Sequence[str] | None, ignore: Sequence[str] | None) -> str:
    parts = [
        f"format={FORMAT}",
        f"trnlens={trnlens.__version__}",
        f"code={code_fingerprint()}",
        f"select={','.join(sorted(select)) if select is not None else '*'}",
        f"ignore={','.join(sorted(ignore or []))}",
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


class CheckCache:
    """Findings by (absolute path, content hash) for one settings key and project folder."""

    def __init__(
        self,
        paths: Sequence[str],
        select: Sequence[str] | None,
        ignore: Sequence[str] | None,
        directory: Path | None = None,
    ):
        directory = directory or cache_dir() / "check"
        folder = os.path.commonpath([os.path.abspath(p) for p in paths]) if paths else os.getcwd()
        name = hashlib.sha256(folder.encode()).hexdigest()[:16]
        self.path = directory / f"{settings_key(select, ignore)}-{name}.pickle"
        self._entries = self._read()
        self._new: dict[str, tuple[str, list[Finding]]] = {}

    def _read(self) -> dict[str, tuple[str, list[Finding]]]:
        # pickle is safe here: the file is in the user's own cache directory (see the docstring),
        # written only by trnlens, and it keeps findings exactly as analysed (fixes included).
        try:
            with open(self.path, "rb") as fh:
                entries = pickle.load(fh)
        except FileNotFoundError:
            return {}
        except Exception:  # torn by a crash, or written by an incompatible Python: start empty
            return {}
        return entries if isinstance(entries, dict) else {}

    def get(self, path: str, digest: str) -> list[Finding] | None:
        found = self._entries.get(os.path.abspath(path))
        if found is None or found[0] != digest:
            return None
        return found[1]

    def put(self, path: str, digest: str, findings: list[Finding]) -> None:
        self._new[os.path.abspath(path)] = (digest, findings)

    def save(self) -> None:
        """Merges this run's entries into the file on disk, atomically; never raises."""
        if not self._new:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            merged = {**self._read(), **self._new}  # what other runs stored meanwhile, kept
            write_atomic(str(self.path), pickle.dumps(merged, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            return  # a read-only or full cache directory: the next run analyses again
        self._entries = merged
        self._new = {}
