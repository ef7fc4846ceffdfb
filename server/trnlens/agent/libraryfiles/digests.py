"""Each library file of a result with its sha256 and size, and which path holds which digest.

Hashed once per (path, size, mtime): a warm agent's repeat run re-hashes nothing. Files over
``LIBRARY_FILE_MAX_BYTES`` get their size and no digest (the server says it skipped them).
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Any

from ..protocol import LIBRARY_FILE_MAX_BYTES

MAX_KNOWN = 4096  # digests remembered for ``files`` requests (a model touches a few dozen files)


class Digests:
    """The digests this agent gave out, by digest (for ``files``) and by file stamp."""

    def __init__(self) -> None:
        self._by_stamp: dict[tuple[str, int, int], str] = {}
        self._paths: dict[str, str] = {}  # sha256 -> path
        self._lock = threading.Lock()  # the reader thread answers ``files`` during a run

    def annotate(self, result: dict[str, Any]) -> None:
        """Adds ``sha256`` and ``bytes`` to every ``library_files`` entry of a result or of each
        variant of a comparison."""
        for run in result.get("variants") or [result]:
            for entry in run.get("library_files") or []:
                path = entry.get("path")
                if isinstance(path, str):
                    entry["sha256"], entry["bytes"] = self.digest(path)

    def digest(self, path: str) -> tuple[str | None, int | None]:
        try:
            stat = os.stat(path)
        except OSError:
            return None, None
        if stat.st_size > LIBRARY_FILE_MAX_BYTES:
            return None, stat.st_size
        stamp = (path, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            known = self._by_stamp.get(stamp)
        if known is None:
            try:
                with open(path, "rb") as fh:
                    known = hashlib.sha256(fh.read()).hexdigest()
            except OSError:
                return None, stat.st_size
            with self._lock:
                if len(self._by_stamp) >= MAX_KNOWN:
                    self._by_stamp.clear()
                    self._paths.clear()
                self._by_stamp[stamp] = known
                self._paths[known] = path
        return known, stat.st_size

    def path_of(self, sha256: str) -> str | None:
        with self._lock:
            return self._paths.get(sha256)
