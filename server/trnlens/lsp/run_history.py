"""A function's run history, worked out off the language server's loop.

Lineage across renames runs git (``git log --follow``, ``git diff --cached``, ``git rev-list`` for
a baseline ref) and the store's lineage queries: seconds in a large repository. These functions
run in a worker thread (lsp/watching.py's history pool), each on a read-only store connection of
its own (a sqlite connection stays in the thread that opened it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trnlens import history
from trnlens.agent import sources
from trnlens.store import Store, StoreError


def file_hashes(text: str) -> dict[str, str]:
    """qualname -> source hash of every definition in ``text`` (empty when it does not parse)."""
    try:
        tree = sources.parse(text)
    except (SyntaxError, ValueError):
        return {}
    found = {}
    for qualname, node, in_class in sources.iter_definitions(tree):
        definition = sources._definition(qualname, node, in_class)
        found[qualname] = sources.source_hash(text, definition)
    return found


def change_in_thread(
    root: Path, run: dict, ref: str | None, threshold: float
) -> history.Change | None:
    """A run's change against its baseline, on a store connection of this thread's own."""
    try:
        store = Store.reader(root)
    except StoreError:
        return None
    try:
        fn = run["function"]
        line = history.lineage(store, root, fn["path"], fn["qualname"],
                               current_hash=fn.get("source_hash"))  # fmt: skip
        base = history.baseline(history.history(store, line), run, ref, root)
        return history.change(base, run, threshold) if base is not None else None
    finally:
        store.close()


def history_answer(
    answer: dict[str, Any],
    path: Path,
    root: Path,
    relpath: str,
    qualname: str,
    current: str | None,
    from_buffer: bool,
    threshold: float,
) -> dict[str, Any]:
    """The history command's runs (in a worker thread, on a store connection of its own)."""
    if not from_buffer:
        try:
            current = file_hashes(path.read_text("utf-8")).get(qualname)
        except (OSError, UnicodeDecodeError):
            current = None
    try:
        store = Store.reader(root)
    except StoreError:
        return answer
    try:
        line = history.lineage(store, root, relpath, qualname, current_hash=current)
        found = history.entries(store, line, threshold)
        for entry in found:
            run = entry.run
            answer["runs"].append(
                entry.row(
                    median_us=(run.get("timing") or {}).get("median_us"),
                    error=(run.get("error") or {}).get("kind"),
                    source_hash=run["function"].get("source_hash"),
                )
            )
        answer["aliases"] = [f"{p}::{q}" for p, q in line.aliases]
        if found:
            newest = found[0].run["function"].get("source_hash")
            answer["stale"] = current is None or newest != current
        return answer
    finally:
        store.close()
