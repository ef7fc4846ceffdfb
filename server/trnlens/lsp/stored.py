"""Reading a function's stored runs for the editor (a leaf: the store only)."""

from __future__ import annotations

from typing import Any

from trnlens.store import Store


def latest_profile(store: Store, path: str, qualname: str) -> dict[str, Any] | None:
    """The latest run that measured the function as written. A comparison stores its fixed
    (``source``) and compiled variants under the same function: they are not its profile."""
    for run in store.runs(path, qualname, limit=10):
        if (run.get("variant") or {}).get("kind", "function") == "function":
            return run
    return None
