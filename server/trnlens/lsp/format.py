"""How figures read in the editor: scaled units, labels that follow the run's time basis, ages."""

from __future__ import annotations

import datetime as dt

from trnlens.headline import headline as run_headline
from trnlens.results import Result

# One formatter for the editor, the terminal and the report (re-exported for the features).
from trnlens.units import count, duration, shapes  # noqa: F401


def age(created_at: str, now: dt.datetime | None = None) -> str:
    """'just now', '2 min ago', '3 h ago', '4 d ago' from an ISO timestamp with a zone."""
    try:
        then = dt.datetime.fromisoformat(created_at)
    except (TypeError, ValueError):
        return "at an unknown time"
    now = now or dt.datetime.now(dt.timezone.utc)
    if then.tzinfo is None:
        then = then.replace(tzinfo=dt.timezone.utc)
    seconds = max(0.0, (now - then).total_seconds())
    if seconds < 45:
        return "just now"
    if seconds < 3600:
        return f"{max(1, round(seconds / 60))} min ago"
    if seconds < 86400:
        return f"{round(seconds / 3600)} h ago"
    return f"{round(seconds / 86400)} d ago"


def headline(result: Result, per_step: bool = False) -> str:
    """'1.44 ms unprofiled · 6 dispatches': the run's one headline figure (trnlens.headline, the
    same in the lens, the hover, the toast, the CLI and the report), its dispatches, and
    'noisy' when the steps' spread was wide (see the warnings). ``per_step``: the figures say
    so before 'noisy' ('6 dispatches per step · noisy', never '· noisy per step')."""
    data = result.data
    parts = [run_headline(data).text]
    if data.get("dispatches_per_step") is not None:
        parts.append(count(data["dispatches_per_step"], "dispatch"))
    if per_step:
        parts[-1] += " per step"
    if (data.get("stability") or {}).get("noisy"):
        parts.append("noisy")
    return " · ".join(parts)


def failure(error: dict) -> str:
    kind = error.get("type") or error.get("kind") or "error"
    return f"failed: {kind}"


def backward_share(time_us: float, backward_us: float) -> list[str]:
    """``["backward 58%"]``: the part of a line's time that is the backward of the autograd
    nodes its forward ops made (a project line or a library line alike); [] without a time."""
    return [f"backward {100 * backward_us / time_us:.0f}%"] if time_us > 0 else []
