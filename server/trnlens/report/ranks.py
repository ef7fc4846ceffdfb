"""The report's ranks section for a multi-rank run: every rank's profiled steps on one time axis.

One lane group per rank (the slowest marked), three lanes each: the profiled steps, the rank's
own work (each step minus the exposed part of its collectives: a collective that compute hid,
DDP's bucketed all-reduce during backward, leaves the work drawn under it), and its collectives
split into the wait (the call's excess over the fastest rank's, drawn first: a rank waits for the
others to arrive) and the rest. Calls in flight together (DDP's buckets) get a row each within
the lane. The axis is the run's (``rank_timelines``: aligned on wall-clock time, checked at a
barrier; the section says how well). Same SVG structure as the step timeline (svg.py), so the
page's script zooms, pans and details it alike.
"""

from __future__ import annotations

from collections import defaultdict

from trnlens import rankfigures
from trnlens.report import escape
from trnlens.report.svg import AXIS_H, GROUP_GAP, LABEL_W, LANE_GAP, ROW_H, WIDTH, _axis
from trnlens.units import data_size, duration

E = escape.text
LANES = (("steps", "profiled steps"), ("work", "own work"), ("collectives", "collectives"))


def section(
    result: dict, first_index: int, trace_href: str | None = None
) -> tuple[str, list[dict]]:
    if not rankfigures.is_multi_rank(result) or not result.get("rank_timelines"):
        return "", []
    svg, details = _svg(result, first_index)
    rows = []
    slowest = result.get("slowest_rank")
    for row in result["ranks"]:
        mark = ' class="straggler"' if row["rank"] == slowest else ""
        rows.append(
            f"<tr{mark}><td>{row['rank']}{' ◀ slowest' if row['rank'] == slowest else ''}</td>"
            + "".join(
                f'<td class="num">{E(duration(row.get(key)))}</td>'
                for key in (
                    "wall_time_per_step_us",
                    "busy_time_per_step_us",
                    "collective_time_per_step_us",
                    "collective_wait_per_step_us",
                    "collective_exposed_per_step_us",
                )
            )  # fmt: skip
            + f'<td class="num">{E(_peak(row))}</td>'
            # the host last: the figures are what a 500 px side panel must show
            + f"<td>{E(row.get('host') or '')}</td></tr>"
        )
    table = (
        '<div class="wide"><table class="ranks"><thead><tr><th>rank</th>'
        "<th>wall</th><th>busy</th><th>in collectives</th><th>waiting</th>"
        '<th title="the part of the time in collectives that no compute of the rank hid">'
        'exposed</th><th title="the rank\'s memory peak in a step (its memory pass)">peak '
        "memory</th><th>host</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table></div>"
    )
    alignment = (result.get("alignment") or {}).get("how") or ""
    strag = result.get("stragglers") or {}
    ranking = ", ".join(f"rank {r}" for r in strag.get("ranking") or [])
    notes = [f"one time axis: {alignment}"] if alignment else []
    href = escape.relative_href(trace_href or "")  # only a plain relative path is linked
    link = (
        f'<p><a class="file" href="{href}">every rank\'s chrome trace in one file</a> '
        '<span class="muted">(on this axis: open it in Perfetto, ui.perfetto.dev)</span></p>'
        if href
        else ""
    )
    memory = rankfigures.nearest_limit_words(result)
    if memory:
        notes.append(memory)
    if ranking:
        trust = "" if strag.get("trusted") else " (not to be trusted here: see the warnings)"
        notes.append(f"straggler ranking (HTA's late start), worst first: {ranking}{trust}")
    return (
        '<section class="ranks-section"><h2>Ranks</h2>'
        f'<p class="headline-ranks"><b>{E(rankfigures.headline(result))}</b> · process group '
        f"{E(result.get('dist_backend'))} · each rank's median step by wall time, so that "
        "busy = wall − waiting</p>"
        f"{table}"
        '<div class="toolbar"><button type="button" data-zoom="in">+</button>'
        '<button type="button" data-zoom="out">−</button>'
        '<button type="button" data-zoom="reset">reset</button></div>'
        f'<div class="timeline-box">{svg}</div>{link}'
        f'<ul class="notes">{"".join(f"<li>{E(n)}</li>" for n in notes)}</ul></section>',
        details,
    )


def _waits(timelines: list[dict]) -> dict:
    """(rank, index of the call in its timeline) -> wait µs, matching the n-th call of a
    collective at a line in a step across ranks (as the agent's rankmerge does)."""
    matched: dict = defaultdict(dict)
    for t in timelines:
        seen: dict = defaultdict(int)
        for i, c in enumerate(t["collectives"]):
            key = (c["step"], c["name"], c.get("path"), c.get("line"))
            matched[key + (seen[key],)][t["rank"]] = (i, c["dur_us"])
            seen[key] += 1
    waits = {}
    for by_rank in matched.values():
        if len(by_rank) != len(timelines):
            continue
        fastest = min(d for _, d in by_rank.values())
        for rank, (i, d) in by_rank.items():
            waits[(rank, i)] = d - fastest
    return waits


def _svg(result: dict, first_index: int) -> tuple[str, list[dict]]:
    timelines = result["rank_timelines"]
    slowest = result.get("slowest_rank")
    waits = _waits(timelines)
    span = max((s[1] for t in timelines for s in t["steps"]), default=0.0) or 1.0
    scale = (WIDTH - LABEL_W - 10) / span
    parts: list[str] = []
    details: list[dict] = []
    y = AXIS_H

    def bar(kind: str, name: str, start: float, dur: float, rank: int, extra: dict,
            top: float | None = None, h: float = ROW_H - 4) -> None:  # fmt: skip
        index = first_index + len(details)
        details.append({"variant": f"rank {rank}", "name": name, "kind": kind, "lane": lane,
                        "start_us": round(start, 3), "dur_us": round(dur, 3), **extra})  # fmt: skip
        x, w = LABEL_W + start * scale, max(dur * scale, 0.5)
        tip = f"rank {rank} · {name} · {duration(dur)}"
        if extra.get("path"):
            tip += f" · {extra['path']}:{extra['line']}"
        if extra.get("modules"):
            tip += f" · {', '.join(extra['modules'])}"
        y0 = by if top is None else top
        text = name if w > 6.5 * len(name) else ""
        parts.append(
            f'<g class="ev {kind}" data-i="{index}" data-s="{start:.3f}" data-d="{dur:.3f}" '
            f'tabindex="0"><rect x="{x:.2f}" y="{y0:.2f}" width="{w:.2f}" height="{h:.2f}"/>'
            f'<text x="{x + 3:.2f}" y="{y0 + 11:.2f}">{E(text)}</text>'
            f"<title>{E(tip)}</title></g>"
        )

    for t in timelines:
        rank = t["rank"]
        marked = rank == slowest
        cls = "group straggler" if marked else "group"
        parts.append(
            f'<text class="{cls}" x="4" y="{y + 12}">rank {rank}'
            f"{' ◀ slowest' if marked else ''}</text>"
        )
        y += ROW_H + 2
        calls = sorted(enumerate(t["collectives"]), key=lambda ic: ic[1]["start_us"])
        rows, count = _rows([c for _, c in calls])
        for lane, title in LANES:
            lane_h = ROW_H * max(count, 1) if lane == "collectives" else ROW_H
            parts.append(
                f'<g class="lane lane-{lane}" data-lane="{lane}">'
                f'<rect class="lane-bg" x="0" y="{y}" width="{WIDTH}" height="{lane_h}"/>'
                f'<text class="lane-title" x="8" y="{y + 13}">{E(title)}</text>'
            )
            by = y + 2
            if lane == "steps":
                for k, (a, b) in enumerate(t["steps"]):
                    bar("frame", f"step {k}", a, b - a, rank, {})
            elif lane == "work":
                for a, b in t["steps"]:
                    for x, y_ in _minus((a, b), _blocked(calls, a, b)):
                        bar("dispatch", "work", x, y_ - x, rank, {})
            else:
                for i, c in calls:
                    where = {"path": c.get("path"), "line": c.get("line")} if c.get("path") else {}
                    extra = {**where, **_about(c)}
                    top, h = by + rows[id(c)] * ROW_H, ROW_H - 4
                    wait = min(waits.get((rank, i), 0.0), c["dur_us"])
                    name = c["name"] + (f" b{c['bucket']}" if c.get("bucket") is not None else "")
                    if wait > 0:
                        bar("gap", f"wait in {name}", c["start_us"], wait, rank, extra, top, h)
                    rest = c["dur_us"] - wait
                    bar("device", name, c["start_us"] + wait, rest, rank, extra, top, h)
            parts.append("</g>")
            y += lane_h + LANE_GAP
        y += GROUP_GAP - LANE_GAP
    return (
        f'<svg class="timeline ranks" data-span="{span:.3f}" data-label-w="{LABEL_W}" '
        f'width="{WIDTH}" height="{y}" viewBox="0 0 {WIDTH} {y}" role="img" '
        f'aria-label="every rank\'s profiled steps on one time axis">{_axis(span, scale)}'
        f'<g class="plot">{"".join(parts)}</g></svg>',
        details,
    )


def _blocked(calls: list, a: float, b: float) -> list[tuple[float, float]]:
    """The parts of step (a, b) the rank spent blocked in a collective: each call's exposed
    parts (the call whole when the run predates them)."""
    out: list[tuple[float, float]] = []
    for _, c in calls:
        if not a <= c["start_us"] <= b:
            continue
        exposed = c.get("exposed")
        if exposed is None:
            exposed = [[c["start_us"], c["start_us"] + c["dur_us"]]]
        out.extend((x, y) for x, y in exposed)
    return out


def _minus(span: tuple[float, float], holes: list[tuple[float, float]]) -> list:
    """``span`` less the union of ``holes``."""
    a, b = span
    out: list[tuple[float, float]] = []
    cursor = a
    for x, y in sorted(holes):
        if y <= cursor or x >= b:
            continue
        if x > cursor:
            out.append((cursor, x))
        cursor = max(cursor, y)
    if cursor < b:
        out.append((cursor, b))
    return out


def _rows(calls: list[dict]) -> tuple[dict[int, int], int]:
    """id(call) -> its row in the lane, and how many rows: calls in flight together get rows
    of their own (a row is reused once its last call ended)."""
    ends: list[float] = []
    placed: dict[int, int] = {}
    for c in sorted(calls, key=lambda c: c["start_us"]):
        row = next((r for r, end in enumerate(ends) if end <= c["start_us"]), len(ends))
        if row == len(ends):
            ends.append(0.0)
        ends[row] = c["start_us"] + c["dur_us"]
        placed[id(c)] = row
    return placed, len(ends)


def _about(call: dict) -> dict:
    """What a call's details say beyond its time: bucket, modules, bytes, exposed part."""
    out: dict = {}
    if call.get("bucket") is not None:
        out["bucket"] = call["bucket"]
    if call.get("modules"):
        out["modules"] = list(call["modules"])
    if call.get("bytes"):
        out["bytes"] = call["bytes"]
    if call.get("exposed") is not None:
        out["exposed_us"] = round(sum(b - a for a, b in call["exposed"]), 3)
    if call.get("source"):
        out["issued_by"] = call["source"]
    return out


def _peak(row: dict) -> str:
    peak = row.get("peak_memory_bytes")
    return data_size(peak) if isinstance(peak, int) else "-"
