"""Checking many files: read, analyse, optionally fix and write back, in parallel when it pays.

Fixes are written atomically (a temporary file in the same directory, then ``os.replace``), so an
interrupted ``--fix`` leaves each file either as it was or fully fixed.
"""

from __future__ import annotations

import gc
import hashlib
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trnlens.analysis.atomic import write_atomic
from trnlens.analysis.engine import analyse_source, asts_freed_per_file, keep_asts
from trnlens.analysis.fixes import apply_edits
from trnlens.analysis.model import Finding
from trnlens.analysis.notebook import analyse_notebook, fix_notebook, is_notebook
from trnlens.analysis.source import decode

if TYPE_CHECKING:
    from trnlens.analysis.cache import CheckCache

# Below this many files a process pool costs more to start than it saves.
PARALLEL_THRESHOLD = 16
# Fixes whose edits overlap are applied over several rounds; more is never needed in practice.
MAX_FIX_ROUNDS = 4


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)  # what remains (after fixing)
    fixed: int = 0  # fixes applied and written
    error: str | None = None  # the file could not be written back


def check_file(
    path: str,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    fix: bool = False,
) -> FileResult:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        from trnlens.analysis.engine import analyse_path

        return FileResult(path, analyse_path(path), error=str(exc))
    if is_notebook(path):
        return _check_notebook(path, data, select, ignore, fix)
    decoded = decode(data)
    findings = analyse_source(decoded.text, path, select, ignore, decode_error=decoded.decode_error)
    result = FileResult(path, findings)
    # A file that did not decode cleanly holds replacement characters: never write it back.
    if not fix or decoded.decode_error:
        return result
    text = decoded.text
    for _ in range(MAX_FIX_ROUNDS):
        safe = [f for f in findings if f.fix and f.fix.applicability == "safe"]
        if not safe:
            break
        edits = [e for f in safe for e in f.fix.edits]  # type: ignore[union-attr]
        new_text = apply_edits(text, edits)
        if new_text == text:
            break
        text = new_text
        result.fixed += len(safe)
        findings = analyse_source(text, path, select, ignore)
    result.findings = findings
    if result.fixed:
        try:
            payload = ("\ufeff" if decoded.bom else "") + text
            write_atomic(path, payload.encode(decoded.encoding))
        except (OSError, UnicodeEncodeError) as exc:
            result.error = f"cannot write fixes: {exc}"
            result.fixed = 0
            result.findings = analyse_source(decoded.text, path, select, ignore)
    return result


def _check_notebook(
    path: str,
    data: bytes,
    select: Sequence[str] | None,
    ignore: Sequence[str] | None,
    fix: bool,
) -> FileResult:
    """A notebook (JSON: always UTF-8): findings in cell coordinates; fixes written into the
    cells' sources, the rest of the file untouched (notebook.py)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return FileResult(path, analyse_source("", path, select, ignore, decode_error=str(exc)))
    if not fix:
        return FileResult(path, analyse_notebook(text, path, select, ignore))
    new_text, findings, fixed = fix_notebook(text, path, select, ignore, MAX_FIX_ROUNDS)
    result = FileResult(path, findings, fixed)
    if fixed:
        try:
            write_atomic(path, new_text.encode("utf-8"))
        except OSError as exc:
            result.error = f"cannot write fixes: {exc}"
            result.fixed = 0
            result.findings = analyse_notebook(text, path, select, ignore)
    return result


def default_jobs() -> int:
    """Every core this process may run on (its affinity, where the OS says)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def check_files(
    paths: Sequence[str],
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    fix: bool = False,
    workers: int | None = None,
    cache: CheckCache | None = None,
) -> list[FileResult]:
    """``check_file`` over ``paths``, in input order, on ``workers`` processes (default: every
    core) when there are enough files. With ``cache`` (never with ``fix``: fixing rewrites
    files), files whose bytes were analysed before are answered from it."""
    workers = workers or default_jobs()
    results: dict[int, FileResult] = {}
    digests: dict[int, str] = {}
    if cache is not None and not fix:
        # Threads: reading and hashing release the GIL, and a warm run is mostly this.
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for i, digest in enumerate(pool.map(_digest, paths)):
                if digest is None:
                    continue  # unreadable: analysed below, which reports the error
                digests[i] = digest
                found = cache.get(paths[i], digest)
                if found is not None:
                    results[i] = FileResult(paths[i], found)
    todo = [i for i in range(len(paths)) if i not in results]
    done = _run([paths[i] for i in todo], select, ignore, fix, workers)
    for i, result in zip(todo, done, strict=True):
        results[i] = result
        if i in digests and result.error is None:
            cache.put(paths[i], digests[i], result.findings)  # type: ignore[union-attr]
    if cache is not None:
        cache.save()
    return [results[i] for i in range(len(paths))]


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def _run(
    paths: Sequence[str],
    select: Sequence[str] | None,
    ignore: Sequence[str] | None,
    fix: bool,
    workers: int,
) -> list[FileResult]:
    if len(paths) < PARALLEL_THRESHOLD or workers < 2:
        with _no_cyclic_gc(), asts_freed_per_file():
            return [check_file(p, select, ignore, fix) for p in paths]
    n = len(paths)
    # Biggest files first, a few at a time: model files differ in size by 100x, and a big one
    # handed out last would leave the other cores idle while it runs.
    order = sorted(range(n), key=lambda i: -_size(paths[i]))
    ordered = [paths[i] for i in order]
    with ProcessPoolExecutor(max_workers=workers, initializer=_start_worker) as pool:
        chunk = max(1, min(4, n // (workers * 16)))
        done = list(
            pool.map(check_file, ordered, [select] * n, [ignore] * n, [fix] * n, chunksize=chunk)
        )
    results: list[FileResult] = [None] * n  # type: ignore[list-item]
    for i, result in zip(order, done, strict=True):
        results[i] = result
    return results


def _start_worker() -> None:
    """A worker lives for one batch: no cyclic collector (``_no_cyclic_gc``), and no AST kept
    past its file (``engine.asts_freed_per_file``)."""
    gc.disable()
    keep_asts(0)


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """A batch runs without the cyclic garbage collector (the workers, which end with the
    batch, never turn it back on). The engine's caches hold millions of AST nodes, which hold
    no cycles and go by reference counting, but every collection walks them again: over a big
    tree that was a third of the time (measured on transformers' 503 model files, one process:
    29.7 s with the collector, 19.8 s without). What the analysis leaves in cycles is a few
    thousand objects over the whole tree (measured: 6,729)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
