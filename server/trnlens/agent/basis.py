"""Line, module and finding times on the basis of the headline the lens shows.

The headline time of a run is the unprofiled median of its timing pass whenever it has one, the
profiled steps' median device (CPU, on the cpu backend) time otherwise: the server's
``trnlens.headline`` names the same figure for every surface (the agent cannot import it; a test
holds the two to the same choice). Choosing the unprofiled median only when the profiler
inflated the steps beyond a limit made the lens switch figures between two runs of the same
function (issue 30). Per-line,
per-module and per-finding times come from profiled events: the headline pass's (a mean over
its steps) or the line-attribution pass's, whose mode inflates every op. Shown beside the
headline as they were, they did not add up: lines summing to 43 ms under a 2.67 ms headline, a
finding of 143 ms in a 126 ms step.

So each such time becomes its share of the profiled total times the headline total
(:func:`rescale_rows`; a finding's own share of its pass's step times the headline total), and
the result says so in ``time_scale`` ({basis, total_us, factor}). Lines then add up to the
headline (all of it when every dispatch has a project line), and no part exceeds the whole.
The profiled figure stays beside each rescaled one (``profiled_<key>``).

One function for every kind of row, so that per-module times (``result["modules"]``) take the
same basis: ``rescale_rows(result["modules"], ("device_us",), scale["factor"])``.

Pure stdlib: part of the agent.
"""

from __future__ import annotations

from collections.abc import Iterable


def headline(device_median_us: float | None, timing: dict | None) -> tuple[str, float | None]:
    """("unprofiled" or "profiled", the headline's time per step) as every surface shows it
    (``trnlens.headline.headline`` makes the same choice from the same figures)."""
    if timing and timing.get("median_us") is not None:
        return "unprofiled", float(timing["median_us"])
    return "profiled", device_median_us


def scale(
    headline_basis: str,
    headline_us: float | None,
    profiled_total_us: float,
    rows_total_us: float,
) -> dict:
    """``time_scale``: the factor that puts profiled per-step parts on the headline's basis.

    ``profiled_total_us``: the profiled time per step the parts are parts of (the mean over
    the headline's steps); ``rows_total_us``: what the parts sum to (more than that total when
    they were measured under the line-attribution mode, less when some dispatches have no
    project line). The wider of the two is the whole the parts share."""
    whole = max(profiled_total_us or 0.0, rows_total_us or 0.0)
    factor = headline_us / whole if headline_us and whole > 0 else 1.0
    return {"basis": headline_basis, "total_us": headline_us, "factor": factor}


def rescale_rows(rows: Iterable[dict], keys: Iterable[str], factor: float) -> None:
    """Multiplies each row's ``keys`` by ``factor`` in place, keeping the profiled figure as
    ``profiled_<key>`` (a row already rescaled is left alone)."""
    keys = tuple(keys)
    for row in rows:
        for key in keys:
            value = row.get(key)
            if value is None or f"profiled_{key}" in row:
                continue
            row[f"profiled_{key}"] = value
            row[key] = value * factor


def rescale_findings(findings: Iterable[dict], headline_us: float | None) -> None:
    """A finding's time becomes its share of its own pass's step times the headline total
    (its share does not change, its time no longer exceeds the step)."""
    if not headline_us:
        return
    for finding in findings:
        share = finding.get("share")
        if share is None or finding.get("time_us") is None or "profiled_time_us" in finding:
            continue
        finding["profiled_time_us"] = finding["time_us"]
        finding["time_us"] = share * headline_us
