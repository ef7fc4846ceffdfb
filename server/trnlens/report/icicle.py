"""The module tree of one step as an icicle chart (inline SVG), and the library lines table.

From a run's ``modules`` (``named_modules`` names, each with its calls, dispatches, self and
total time per step) and ``frames``. The top row is the step's attributed time (the frames plus
the rest); below it each module spans its total time, its children under it left to right, so a
module's width is its share of the step and the part of it no child covers is its own work. A
module whose parent fell out of the top N hangs under the nearest ancestor that is there (its
name says where it sits). Every rectangle's ``<title>`` gives the figures; text is escaped, and
no script is needed to read it.

A training step (schema 4: modules carry the backward of the autograd nodes their forward ops
made) splits below the step row into a forward and a backward block, each with the module tree
under it at that direction's times: the same module twice, once per direction, so the backward
a module costs sits beside its forward. What no module made (the optimizer, AccumulateGrad on the
``backward()`` line) is the step row's part that no block covers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trnlens import memoryfigures
from trnlens.report import escape
from trnlens.units import data_size, duration

WIDTH = 1200
ROW_H = 22
MIN_LABEL_W = 48  # narrower rectangles carry no text (their title still tells)
CHAR_W = 6.6  # 11px text, for cutting labels to their rectangle
MAX_LIBRARY_LINES = 25
MAX_KEEPERS = 10  # the largest keepers of activations listed under the tree

E = escape.text
A = escape.attr


@dataclass
class Node:
    name: str
    entry: dict | None
    children: list[Node] = field(default_factory=list)

    @property
    def total_us(self) -> float:
        if self.entry is not None:
            return float(self.entry.get("total_time_per_step_us") or 0)
        return sum(child.total_us for child in self.children)

    def part_us(self, direction: str | None) -> float:
        """Its total time in one direction ("forward", "backward"; None: both)."""
        if direction is None:
            return self.total_us
        if self.entry is None:
            return sum(child.part_us(direction) for child in self.children)
        backward = float(self.entry.get("total_backward_time_per_step_us") or 0)
        return backward if direction == "backward" else max(self.total_us - backward, 0.0)


def tree(modules: list[dict]) -> list[Node]:
    """The modules as a forest: each under the nearest ancestor (by dotted name) present; the
    root module, which ``named_modules`` names "", above every name without one."""
    nodes = {m["name"]: Node(m["name"], m) for m in modules if isinstance(m.get("name"), str)}
    roots: list[Node] = []
    for name in sorted(nodes, key=lambda n: (n.count(".") + bool(n), n)):
        parent = None
        prefix = name
        while "." in prefix:
            prefix = prefix.rsplit(".", 1)[0]
            if prefix in nodes:
                parent = nodes[prefix]
                break
        if parent is None and name and "" in nodes:
            parent = nodes[""]
        (parent.children if parent else roots).append(nodes[name])
    return roots


def display_name(name: str) -> str:
    return name or "(root)"


def attributed_us(result: dict) -> float:
    frames = result.get("frames") or []
    rest = result.get("frames_rest") or {}
    total = sum(f.get("self_time_per_step_us") or 0 for f in frames)
    return total + (rest.get("self_time_per_step_us") or 0)


def svg(result: dict) -> str:
    """The icicle chart's SVG, or "" when the run has no module tree."""
    roots = tree(result.get("modules") or [])
    if not roots:
        return ""
    step = max(attributed_us(result), sum(r.total_us for r in roots)) or 1.0
    scale = WIDTH / step
    kept = _kept(result)
    rects: list[str] = []
    depth = _depth(roots)
    rects.append(
        _rect(0, 0, WIDTH, "step", f"step: {duration(step)} attributed per step", "step", 1.0)
    )
    if has_backward(result):
        directions: tuple = ("forward", "backward")
        depth += 1
    else:
        directions = (None,)
    x = 0.0
    for direction in directions:
        row = 1
        if direction is not None:  # the direction's block, its module trees under it
            part = sum(r.part_us(direction) for r in roots)
            share = part / step
            title = f"{direction}: {duration(part)} in modules per step; {share:.1%} of the step"
            label = f"{direction} · {duration(part)}"
            rects.append(_rect(x, ROW_H, part * scale, label, title, f"direction {direction}",
                               share, direction, direction))  # fmt: skip
            row = 2
        for root in sorted(roots, key=lambda n: -n.part_us(direction)):
            _place(root, x, row, scale, step, rects, direction, kept)
            x += root.part_us(direction) * scale
    height = (depth + 1) * ROW_H
    return (
        f'<svg class="icicle" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="module tree of one step">{"".join(rects)}</svg>'
    )


def _depth(nodes: list[Node]) -> int:
    return max((1 + _depth(n.children) for n in nodes), default=0)


def has_backward(result: dict) -> bool:
    return any(m.get("total_backward_time_per_step_us") for m in result.get("modules") or [])


def _place(node, x, row, scale, step, out, direction=None, kept=None) -> None:
    part = node.part_us(direction)
    width = part * scale
    entry = node.entry or {}
    kind = entry.get("type") or "module"
    share = part / step if step else 0.0
    if direction is None:
        title = (
            f"{display_name(node.name)} ({kind}): {duration(node.total_us)} total, "
            f"{duration(entry.get('self_time_per_step_us'))} self, "
            f"{_noun(entry.get('calls_per_step'), 'call')}, "
            f"{_noun(entry.get('dispatches_per_step'), 'dispatch')} per step; "
            f"{share:.1%} of the step"
        )
        title += _keeps(kept, node.name)
    else:
        total_n = entry.get("total_dispatches_per_step")
        back_n = entry.get("total_backward_dispatches_per_step") or 0
        n = back_n if direction == "backward" or total_n is None else total_n - back_n
        made = " of the nodes its forward made" if direction == "backward" else ""
        title = (
            f"{display_name(node.name)} ({kind}) {direction}{made}: {duration(part)} total, "
            f"{_noun(n, 'dispatch')} per step (with its children); {share:.1%} of the step; "
            f"both directions: {duration(node.total_us)}, "
            f"{_noun(entry.get('calls_per_step'), 'call')}"
        )
        title += _keeps(kept, node.name) if direction == "forward" else ""
    label = f"{display_name(node.name).rsplit('.', 1)[-1]} · {kind}"
    source = entry.get("source") or {}  # the module's class: a click opens it (report.js)
    out.append(
        _rect(x, row * ROW_H, width, label, title, "module", share, node.name, direction, source)
    )
    child_x = x
    for child in sorted(node.children, key=lambda n: -n.part_us(direction)):
        _place(child, child_x, row + 1, scale, step, out, direction, kept)
        child_x += child.part_us(direction) * scale


def _rect(x, y, width, label, title, css, share, name="", direction=None, source=None) -> str:
    if width < 0.5:
        return ""
    text = ""
    if width >= MIN_LABEL_W:
        room = int((width - 6) / CHAR_W)
        shown = label if len(label) <= room else label[: max(room - 1, 1)] + "…"
        text = f'<text x="{x + 3:.1f}" y="{y + 15}">{E(shown)}</text>'
    hue = "" if css == "step" else f' data-share="{share:.3f}"'
    if direction is not None:
        hue += f' data-direction="{A(direction)}"'
    where = ""
    if source and source.get("path") and isinstance(source.get("line"), int):
        where = f' data-path="{A(source["path"])}" data-line="{source["line"]}" tabindex="0"'
    return (
        f'<g class="icicle-node {css}" data-name="{A(name)}"{where}{hue}><title>{E(title)}</title>'
        f'<rect x="{x:.1f}" y="{y}" width="{max(width - 1, 0.5):.1f}" height="{ROW_H - 2}"/>'
        f"{text}</g>"
    )


def _n(value) -> str:
    return "?" if value is None else f"{float(value):g}"


def section(result: dict, prefix: str = "") -> str:
    """The module tree and the library lines of one run ("" when it has neither)."""
    chart = svg(result)
    table = library_table(result)
    if not chart and not table:
        return ""
    parts = [f'<section class="modules-section"><h2>{E(prefix)}Module tree</h2>']
    if chart:
        rest = result.get("modules_rest") or {}
        more = f" · {_n(rest.get('count'))} smaller modules not drawn" if rest.get("count") else ""
        split = (
            "; forward and backward apart, a module's backward being that of the autograd nodes "
            "its forward made"
            if has_backward(result)
            else ""
        )
        parts.append(
            '<p class="muted">one step: each module spans its total time (itself and its '
            f"children), children below it, widest first{split}; hover a block for its figures"
            f"{more}</p>"
            f'<div class="icicle-box">{chart}</div>'
        )
    parts.append(keepers_table(result))
    parts.append(table)
    parts.append("</section>")
    return "".join(parts)


def _kept(result: dict) -> dict[str, int]:
    """Each module's activations kept for backward (bytes its own calls made that autograd
    still held when the step's backward started: agent/memorypass.py); {} without them."""
    memory = memoryfigures.read(result)
    return {k.module: k.bytes for k in memory.activations_by_module} if memory else {}


def _keeps(kept: dict[str, int] | None, name: str) -> str:
    found = (kept or {}).get(name)
    return f"; keeps {data_size(found)} of activations for backward" if found else ""


def keepers_table(result: dict) -> str:
    """The modules that keep most activations for backward, each with its forward and
    backward time (the tree's two blocks) beside its bytes: what checkpointing one of them
    would save, and what its forward costs to recompute. "" without a memory pass that saw a
    backward."""
    memory = memoryfigures.read(result)
    keepers = memory.activations_by_module if memory else []
    if not keepers:
        return ""
    total = sum(k.bytes for k in keepers)
    entries = {m.get("name"): m for m in result.get("modules") or []}
    rows = []
    for keeper in keepers[:MAX_KEEPERS]:
        entry = entries.get(keeper.module) or {}
        node = Node(keeper.module, entry or None)
        timed = bool(entry)
        forward = duration(node.part_us("forward")) if timed else "-"
        backward = duration(node.part_us("backward")) if timed else "-"
        source = entry.get("source") or {}
        where = ""
        if source.get("path") and isinstance(source.get("line"), int):
            where = f' class="src" data-path="{A(source["path"])}" data-line="{source["line"]}"'
        name = (
            "(the step's own code, outside any module)"
            if keeper.module == memoryfigures.NO_MODULE
            else display_name(keeper.module)
        )
        kind = f' <span class="muted">{E(entry["type"])}</span>' if entry.get("type") else ""
        rows.append(
            f'<tr{where}><td class="num">{E(data_size(keeper.bytes))}</td>'
            f'<td class="num">{keeper.bytes / total:.0%}</td>'
            f'<td class="num">{E(forward)}</td><td class="num">{E(backward)}</td>'
            f"<td><code>{E(name)}</code>{kind}</td></tr>"
        )
    more = len(keepers) - MAX_KEEPERS
    if more > 0:
        rows.append(f'<tr><td colspan="5" class="muted">… {more} more modules</td></tr>')
    return (
        "<h3>Activations kept for backward, by module (one step)</h3>"
        f"<p class=\"muted\">{E(data_size(total))} in all, each module's own calls' tensors that "
        "autograd still held when backward started (its memory pass); forward and backward: "
        "its time per step in each, with its children</p>"
        '<div class="wide"><table class="keepers"><thead><tr><th class="num">kept</th>'
        '<th class="num">share</th><th class="num">forward</th><th class="num">backward</th>'
        "<th>module</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def library_table(result: dict) -> str:
    frames = [f for f in result.get("frames") or [] if not f.get("project")]
    findings = result.get("library_findings") or []
    if not frames and not findings:
        return ""
    total = attributed_us(result)
    frames.sort(key=lambda f: -(f.get("self_time_per_step_us") or 0))
    rows = []
    for frame in frames[:MAX_LIBRARY_LINES]:
        library = frame.get("library") or {}
        name = " ".join(str(v) for v in (library.get("name"), library.get("version")) if v)
        time_us = frame.get("self_time_per_step_us") or 0
        share = time_us / total if total else 0.0
        callers = ", ".join(f"{c.get('path')}:{c.get('line')}" for c in frame.get("callers") or [])
        # share and time first: at a side panel's 500 px they are the figures to see; the
        # row opens the library file at the line (report.js, the extension's reveal)
        rows.append(
            f'<tr class="src" data-path="{A(frame.get("path"))}" '
            f'data-line="{A(frame.get("line"))}">'
            f'<td class="num">{share:.1%}</td><td class="num">{E(duration(time_us))}</td>'
            f'<td class="where"><code>{E(_short(frame.get("path")))}:{E(frame.get("line"))}</code>'
            f" {E(frame.get('function'))}</td>"
            f'<td class="num">{_n(frame.get("dispatches_per_step"))}</td>'
            f'<td class="num">{_n(frame.get("backward_dispatches_per_step") or 0)}</td>'
            f'<td>{E(name)}</td><td class="callers">{E(callers)}</td></tr>'
        )
    more = len(frames) - MAX_LIBRARY_LINES
    if more > 0:
        rows.append(f'<tr><td colspan="7" class="muted">… {more} more library lines</td></tr>')
    notes = "".join(f'<li class="warn">{E(f.get("message"))}</li>' for f in findings)
    return (
        "<h3>Library lines (self time: each dispatch on its innermost frame)</h3>"
        + (f'<ul class="library-findings">{notes}</ul>' if notes else "")
        # in its own scrolling box, like every wide table: the page never scrolls sideways
        + '<div class="wide"><table class="library-lines"><thead><tr><th class="num">share</th>'
        '<th class="num">time</th><th>line</th><th class="num">dispatches</th>'
        '<th class="num" title="the backward of the autograd nodes its ops made, part of the '
        'dispatches">of them backward</th><th>library</th>'
        "<th>called from</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _short(path) -> str:
    """A library path from its package on (``transformers/models/llama/modeling_llama.py``)."""
    text = str(path)
    for marker in ("site-packages/", "dist-packages/"):
        if marker in text:
            return text.rsplit(marker, 1)[1]
    return Path(text).name


def _noun(n, noun: str) -> str:
    """``1 call``, ``2 calls``, ``1 dispatch``: the noun agrees with the figure as shown."""
    text = _n(n)
    if text == "1":
        return f"1 {noun}"
    return f"{text} {noun}es" if noun.endswith("ch") else f"{text} {noun}s"
