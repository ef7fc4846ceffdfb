"""The texts of the library files a remote run executed: a local content-addressed cache.

A remote agent gives each ``library_files`` entry of its result a sha256 and a size
(``agent/libraryfiles/``). After the run, over the agent's own connection, the server asks only
for the digests this cache lacks (:func:`fetch`), checks every answer against its digest and
keeps it as ``<cache>/library-files/<sha256>/<file name>``, read-only: the static rules read it
there (:func:`attach`), ``compare --fix`` re-derives its swap from it, and the editor opens it for
the library-file hints (``library_copies`` maps each remote path to its copy). Files over
``LIBRARY_FILE_MAX_BYTES`` are neither sent nor analysed: the run's warnings name them. The cache
keeps at most ``CACHE_MAX_BYTES``, the copies used longest ago removed first.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import tempfile
import zlib
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from trnlens.agent.protocol import FILES_BATCH_BYTES, LIBRARY_FILE_MAX_BYTES
from trnlens.libraries import rules
from trnlens.targets.bundle import cache_dir

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# The cache keeps at most this much; the copies used longest ago go first (a model's files are a
# few MB: this holds dozens of library versions).
CACHE_MAX_BYTES = 256_000_000
MAX_ROUNDS = 64  # ``later`` answers asked again; a bound on a misbehaving agent
# Asks the agent for these digests; returns its ``file-contents`` items.
Ask = Callable[[list[str]], Awaitable[list[dict]]]


def cache_root() -> Path:
    return cache_dir() / "library-files"


def cached(sha256: str) -> Path | None:
    """The local copy of the file with this digest, if the cache has it."""
    if not _SHA256.match(sha256):
        return None
    directory = cache_root() / sha256
    try:
        found = next((p for p in directory.iterdir() if p.is_file()), None)
        if found is not None:
            os.utime(directory)  # used now: the last to go when the cache is pruned
        return found
    except OSError:
        return None


def keep(sha256: str, name: str, data: bytes) -> Path:
    """Stores ``data`` under its digest (checked: ValueError when it does not match)."""
    if not _SHA256.match(sha256) or hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError("the bytes do not match their digest")
    directory = cache_root() / sha256
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / (os.path.basename(name) or "file.py")
    fd, temp = tempfile.mkstemp(dir=directory, suffix=".part")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(temp, 0o444)  # a copy to read: edits there would change nothing on the host
    os.replace(temp, final)  # two servers racing write the same bytes
    return final


def prune(max_bytes: int = CACHE_MAX_BYTES) -> int:
    """Removes the copies used longest ago (a copy's folder's mtime: touched on every read)
    until the cache holds at most ``max_bytes``; returns how many went."""
    entries = []
    try:
        for directory in cache_root().iterdir():
            files = [p for p in directory.iterdir() if p.is_file()]
            size = sum(p.stat().st_size for p in files)
            entries.append((directory.stat().st_mtime, size, directory, files))
    except OSError:
        return 0
    total = sum(size for _, size, _, _ in entries)
    removed = 0
    for _, size, directory, files in sorted(entries, key=lambda e: e[0]):
        if total <= max_bytes:
            break
        try:
            for path in files:
                path.unlink()
            directory.rmdir()
        except OSError:
            continue
        total -= size
        removed += 1
    return removed


def is_remote(run: dict) -> bool:
    """The run's library files carry digests: they are on another host (agent/libraryfiles)."""
    return any("sha256" in entry for entry in run.get("library_files") or [])


def _entries(runs: Iterable[dict]) -> Iterable[dict]:
    for run in runs:
        for entry in run.get("library_files") or []:
            if isinstance(entry.get("sha256"), str):
                yield entry


def missing(runs: Iterable[dict]) -> list[str]:
    """The digests of the runs' library files that the cache lacks, each once."""
    found: dict[str, None] = {}
    for entry in _entries(runs):
        if cached(entry["sha256"]) is None:
            found[entry["sha256"]] = None
    return list(found)


async def fetch(ask: Ask, runs: list[dict]) -> list[str]:
    """Fills the cache with the runs' library files it lacks; returns warnings for the files
    that could not come (each run gets them too)."""
    names = {e["sha256"]: str(e.get("path")) for e in _entries(runs)}
    wanted = missing(runs)
    problems: list[str] = []
    for _ in range(MAX_ROUNDS):
        if not wanted:
            break
        later = []
        for item in await ask(wanted):
            sha256 = str(item.get("sha256"))
            if item.get("later"):
                later.append(sha256)
            elif item.get("error"):
                problems.append(f"{names.get(sha256, sha256)}: {item['error']}")
            elif sha256 in names:
                try:
                    data = zlib.decompress(base64.b64decode(str(item.get("data")), validate=True))
                    keep(sha256, names[sha256], data)
                except (ValueError, binascii.Error, zlib.error, OSError) as exc:
                    problems.append(f"{names[sha256]}: not kept ({exc})")
        if later == wanted:
            problems.append(f"{len(later)} library files never came (over {FILES_BATCH_BYTES})")
            break
        wanted = later
    if names:
        prune()
    notes = []
    if problems:
        listed = "; ".join(problems[:5]) + (" ..." if len(problems) > 5 else "")
        notes.append(f"library files not read from the host: {listed}")
    for run in runs:
        run.setdefault("warnings", []).extend(notes)
    return notes


def reader(run: dict) -> rules.Reader:
    """Reads a remote run's library file from the cache, by the digest the run gave its path;
    never the path itself (on this machine it may be another file, or none)."""
    digests = {e["path"]: e["sha256"] for e in _entries([run])}

    def read(path: str) -> bytes | None:
        copy = cached(digests.get(path, ""))
        if copy is None:
            return None
        try:
            return copy.read_bytes()
        except OSError:
            return None

    return read


def attach(run: dict) -> None:
    """The static rules on a run's library files: this machine's for a local run, the cached
    texts of the host's for a remote one, with ``library_copies`` and a warning naming the
    files over the size bound."""
    if not is_remote(run):
        rules.attach(run)
        return
    rules.attach(run, reader(run))
    copies = {}
    for entry in _entries([run]):
        copy = cached(entry["sha256"])
        if copy is not None:
            copies[entry["path"]] = str(copy)
    if copies:
        run["library_copies"] = copies
    big = [
        str(e.get("path"))
        for e in run.get("library_files") or []
        if e.get("sha256") is None and (e.get("bytes") or 0) > LIBRARY_FILE_MAX_BYTES
    ]
    if big:
        run.setdefault("warnings", []).append(
            f"{len(big)} library files over {LIBRARY_FILE_MAX_BYTES // 1_000_000} MB were not "
            f"analysed: {', '.join(os.path.basename(p) for p in big[:5])}"
        )
