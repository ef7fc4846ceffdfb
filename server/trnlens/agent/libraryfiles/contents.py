"""The answer to a ``files`` request: the bytes of library files, by the digests given out.

Each file is read again and checked against its digest (a library upgraded since the run is
refused, not sent under a stale name), compressed and base64-encoded into the JSON line. One
answer holds at most ``FILES_BATCH_BYTES`` of raw bytes: the rest are marked ``later`` and the
server asks again.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from typing import Any

from ..protocol import FILES_BATCH_BYTES, LIBRARY_FILE_MAX_BYTES
from .digests import Digests


def answer(digests: Digests, wanted: list[str]) -> list[dict[str, Any]]:
    files: list[dict[str, Any]] = []
    sent = 0
    for sha256 in wanted:
        path = digests.path_of(sha256)
        if path is None:
            files.append({"sha256": sha256, "error": "no file of this run has that digest"})
            continue
        try:
            with open(path, "rb") as fh:
                data = fh.read(LIBRARY_FILE_MAX_BYTES + 1)
        except OSError as exc:
            files.append({"sha256": sha256, "error": f"{path}: {exc.strerror or exc}"})
            continue
        if len(data) > LIBRARY_FILE_MAX_BYTES:
            files.append({"sha256": sha256, "error": f"{path} is over the size bound"})
            continue
        if hashlib.sha256(data).hexdigest() != sha256:
            files.append({"sha256": sha256, "error": f"{path} changed since the run"})
            continue
        if sent and sent + len(data) > FILES_BATCH_BYTES:
            files.append({"sha256": sha256, "later": True})
            continue
        sent += len(data)
        encoded = base64.b64encode(zlib.compress(data, 6)).decode("ascii")
        files.append({"sha256": sha256, "path": path, "data": encoded})
    return files
