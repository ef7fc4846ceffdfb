"""Inline SVG drawn here: the timelines (stacked on one time axis) and the per-line bars.

Why generated SVG and not a charting library: the report must open offline under a strict CSP
(a webview's nonce-only policy) and a malicious result must not inject markup. A few hundred lines
of SVG written with escaped text need no vendored JavaScript to review and pin, render without a
script (the page's small script only adds zoom, pan and details), and every element carries its
data index so the script never parses markup it did not write. Widths are presentation attributes,
not inline ``style``, which the CSP forbids.
"""

from __future__ import annotations

from trnlens.report import escape
from trnlens.report.timeline import LANES, Timeline
from trnlens.units import duration as format_us

WIDTH = 1200  # the static drawing's width; the page's script redraws at the real width
LABEL_W = 190  # lane titles
ROW_H = 18
LANE_GAP = 6
GROUP_GAP = 26
AXIS_H = 24


def timelines(runs: list[Timeline], first_index: int = 0) -> tuple[str, list[dict]]:
    """One SVG with every timeline's lanes on a shared axis; returns (svg, event details).

    ``first_index`` numbers the details from there (several SVGs on one page share a table).
    """
    span = max((t.duration_us for t in runs), default=0.0) or 1.0
    scale = (WIDTH - LABEL_W - 10) / span
    parts: list[str] = []
    details: list[dict] = []
    y = AXIS_H
    for t in runs:
        parts.append(
            f'<text class="group" x="4" y="{y + 12}">{escape.text(t.label)}'
            f'<tspan class="muted"> · {escape.text(t.step_name or "whole trace")} · '
            f"{escape.text(format_us(t.duration_us))}</tspan></text>"
        )
        y += ROW_H + 2
        for lane, title in LANES:
            rows = t.rows.get(lane, 0)
            height = max(rows, 1) * ROW_H
            parts.append(
                f'<g class="lane lane-{lane}" data-lane="{lane}">'
                f'<rect class="lane-bg" x="0" y="{y}" width="{WIDTH}" height="{height}"/>'
                f'<text class="lane-title" x="8" y="{y + 13}">{escape.text(title)}</text>'
            )
            if rows == 0:
                why = t.empty.get(lane, "no events")
                parts.append(
                    f'<text class="muted empty" x="{LABEL_W + 6}" y="{y + 13}">'
                    f"{escape.text(why)}</text>"
                )
            for bar in (b for b in t.bars if b.lane == lane):
                index = first_index + len(details)
                details.append(_detail(bar, t.label))
                x = LABEL_W + bar.start * scale
                w = max(bar.dur * scale, 0.5)
                by: float = y + bar.row * ROW_H + 2
                bh: float = ROW_H - 4
                if bar.level is not None:  # a memory slice: as high as its bytes
                    bh = max(bar.level * (height - 4), 1.0)
                    by = y + height - 2 - bh
                parts.append(
                    f'<g class="ev {bar.kind}" data-i="{index}" data-s="{bar.start:.3f}" '
                    f'data-d="{bar.dur:.3f}" tabindex="0">'
                    f'<rect x="{x:.2f}" y="{by:.2f}" width="{w:.2f}" height="{bh:.2f}"/>'
                    f'<text x="{x + 3:.2f}" y="{by + 11}">'
                    f"{escape.text(bar.name if w > 6.5 * len(bar.name) else '')}</text>"
                    f"<title>{escape.text(_tooltip(bar))}</title>"
                    "</g>"
                )
            parts.append("</g>")
            y += height + LANE_GAP
        y += GROUP_GAP - LANE_GAP
    axis = _axis(span, scale)
    return (
        f'<svg class="timeline" data-span="{span:.3f}" data-label-w="{LABEL_W}" '
        f'width="{WIDTH}" height="{y}" viewBox="0 0 {WIDTH} {y}" role="img" '
        f'aria-label="timeline of one measured step">{axis}<g class="plot">{"".join(parts)}</g>'
        "</svg>",
        details,
    )


def _axis(span: float, scale: float) -> str:
    ticks = []
    for i in range(6):
        t = span * i / 5
        x = LABEL_W + t * scale
        anchor = ' text-anchor="end"' if i == 5 else ""  # the last label stays inside
        ticks.append(
            f'<g class="tick" data-t="{t:.3f}"><line x1="{x:.2f}" x2="{x:.2f}" y1="{AXIS_H - 6}" '
            f'y2="{AXIS_H}"/><text x="{x + (-2 if i == 5 else 2):.2f}" y="{AXIS_H - 9}"{anchor}>'
            f"{escape.text(format_us(t))}</text></g>"
        )
    return f'<g class="axis">{"".join(ticks)}</g>'


def _tooltip(bar) -> str:
    """What hovering an event says: name, duration, shapes, source line."""
    parts = [bar.name, format_us(bar.dur)]
    if bar.shapes:
        parts.append("shapes " + ", ".join(str(s) for s in bar.shapes if s))
    if bar.site:
        parts.append(f"{bar.site[0]}:{bar.site[1]}")
    if bar.note:
        parts.append(bar.note)
    return " · ".join(parts)


def _detail(bar, label: str) -> dict:
    detail = {
        "variant": label,
        "name": bar.name,
        "kind": bar.kind,
        "lane": bar.lane,
        "start_us": round(bar.start, 3),
        "dur_us": round(bar.dur, 3),
    }
    if bar.shapes:
        detail["shapes"] = bar.shapes
    if bar.site:
        detail["path"], detail["line"] = bar.site
    if bar.note:
        detail["note"] = bar.note
    return detail


def share_bar(share: float, width: int = 160) -> str:
    """A horizontal bar for a share in [0, 1] (the per-line breakdown)."""
    share = min(max(share, 0.0), 1.0)
    return (
        f'<svg class="bar" width="{width}" height="12" viewBox="0 0 {width} 12" '
        'preserveAspectRatio="none" aria-hidden="true">'
        f'<rect class="bar-bg" x="0" y="1" width="{width}" height="10"/>'
        f'<rect class="bar-fg" x="0" y="1" width="{share * width:.1f}" height="10"/></svg>'
    )
