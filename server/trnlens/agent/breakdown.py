"""The attribution pass's tables: figures per source frame (library code included), per nn.Module,
and the host syncs, from the pass's events and the labels ``attribution.py`` put there.

Times are the headline pass's when the attributed step dispatched the same ops in the same order
as every headline step (eager code does: the same pairing as ``linespass.run``), else the
attribution pass's own (inflated by its mode; a warning says so there). Sizes are bounded: the top
``limit`` frames and modules, the rest summed into ``frames_rest``/``modules_rest`` (a 32-layer
model must not write megabytes), with every ancestor of a kept module kept, so the tree is whole.
"""

from __future__ import annotations

from collections import defaultdict
from typing import overload

from . import events as ev
from .attribution import library_of
from .backward.links import BackwardLinks, node_of
from .events import MODULE_LABEL

# Ops that copy one scalar to the host: the host waits for everything queued before them.
SYNC_OPS = ("aten::_local_scalar_dense", "aten::item", "aten::is_nonzero")
COPY_OPS = ("aten::to", "aten::_to_copy", "aten::copy_")
# Device runtime calls that block the host (CUDA; the profiler records them as runtime events).
DEVICE_SYNCS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize")
CALLERS_KEPT = 5


class Breakdown:
    """One attribution pass, read: ``frames()``, ``modules()``, ``host_syncs()``."""

    def __init__(self, attr_events, sites, modules, kinds, headline_events, time_us,
                 backward: bool = True):  # fmt: skip
        self.events = [e for e in attr_events if ev.is_host(e)]
        # Backward at its forward (backward/links.py); off: at the line that ran it (backward())
        self.links = BackwardLinks(self.events) if backward else None
        self.sites = sites  # label -> (innermost frame, project frame), raw (file, line, func)
        self.info = modules  # module key -> attribution.ModuleInfo
        self.kinds = kinds
        self.time_us = time_us
        attributed = ev.roots_by_step(self.events)
        self.attr_steps = max(len(attributed), 1)
        first = attributed[0] if attributed else []
        names = [ev.dispatch_key(r) for r in first]
        headline = ev.roots_by_step([e for e in headline_events if ev.is_host(e)])
        self.headline_times = bool(headline) and all(
            [ev.dispatch_key(r) for r in roots] == names for roots in headline
        )
        if self.headline_times:
            where = [self.where(r) for r in first]
            self.pairs = [(where[i], r) for roots in headline for i, r in enumerate(roots)]
            self.steps = len(headline)
        else:
            self.pairs = [(self.where(r), r) for roots in attributed for r in roots]
            self.steps = self.attr_steps

    # -- where one event ran
    def where(self, event):
        """(innermost frame, project frame, module key, backward) of an event. Forward work: its
        innermost line label and module label. Work the autograd engine ran (``backward`` true):
        those of the forward op that made its node, where one did (``AccumulateGrad`` and the
        engine's own keep the line that ran them: ``loss.backward()``)."""
        if self.links is None:
            return self._where(event) + (node_of(event) is not None,)
        node, forward = self.links.forward_of(event)
        return self._where(forward if forward is not None else event) + (node is not None,)

    def _where(self, event):
        """(innermost frame, project frame, module key) of an event: its innermost line label
        and module label; a region no label covers (compiled code) takes its module's caller."""
        label = module = None
        parent = event.cpu_parent
        while parent is not None and (label is None or module is None):
            name = parent.name
            if label is None and name in self.sites:
                label = name
            elif module is None and name.startswith(MODULE_LABEL):
                module = int(name[len(MODULE_LABEL) :])
            parent = parent.cpu_parent
        if label is not None:
            innermost, project = self.sites[label]
        elif module is not None:
            info = self.info.get(module)
            innermost, project = (info.called_from, info.caller) if info else (None, None)
        else:
            innermost = project = None
        return innermost, project, module

    def project_site(self, event) -> tuple[str, int] | None:
        """The project (path, line) that dispatched ``event`` (what ``lines`` counts on)."""
        project = self.where(event)[1]
        return (self.kinds.display(project[0]), project[1]) if project else None

    # -- rows
    @overload
    def _frame(self, raw: None) -> None: ...
    @overload
    def _frame(self, raw: tuple) -> dict: ...
    def _frame(self, raw: tuple | None) -> dict | None:
        if raw is None:
            return None
        project = self.kinds.kind(raw[0]) == "project"  # a variant's source text too
        return {
            "path": self.kinds.display(raw[0]),
            "line": raw[1],
            "function": raw[2],
            "project": project,
            "library": None if project else library_of(raw[0]),
        }

    def _site(self, raw) -> dict | None:
        return None if raw is None else {"path": self.kinds.display(raw[0]), "line": raw[1]}

    def frames(self, limit: int) -> tuple[list[dict], dict]:
        rows: dict = {}
        callers: dict = defaultdict(lambda: defaultdict(int))
        for (innermost, project, _, backward), root in self.pairs:
            if innermost is None:
                continue
            key = innermost[:2] + (innermost[2],)
            row = rows.setdefault(key, [0, 0.0, 0, 0.0])
            time_us = self.time_us(root)
            row[0] += 1
            row[1] += time_us
            if backward:
                row[2] += 1
                row[3] += time_us
            callers[key][project[:2] if project else None] += 1
        table = []
        for key, (count, time_us, back_n, back_t) in rows.items():
            row = self._frame(key)
            assert row is not None  # a key here is a frame: only a missing one maps to None
            row["dispatches_per_step"] = count / self.steps
            row["self_time_per_step_us"] = time_us / self.steps
            # The part the autograd engine ran for this line's forward ops (both columns above
            # include it: forward is the difference).
            row["backward_dispatches_per_step"] = back_n / self.steps
            row["backward_self_time_per_step_us"] = back_t / self.steps
            row["callers"] = [
                {"path": self.kinds.display(site[0]), "line": site[1],
                 "dispatches_per_step": n / self.steps}
                for site, n in sorted(callers[key].items(), key=lambda kv: -kv[1])
                if site is not None
            ][:CALLERS_KEPT]  # fmt: skip
            table.append(row)
        table.sort(key=lambda r: (-r["self_time_per_step_us"], -r["dispatches_per_step"]))
        kept, rest = table[:limit], table[limit:]
        return kept, {
            "count": len(rest),
            "dispatches_per_step": sum(r["dispatches_per_step"] for r in rest),
            "self_time_per_step_us": sum(r["self_time_per_step_us"] for r in rest),
            "backward_dispatches_per_step": sum(r["backward_dispatches_per_step"] for r in rest),
            "backward_self_time_per_step_us": sum(
                r["backward_self_time_per_step_us"] for r in rest
            ),
        }

    def modules(self, limit: int) -> tuple[list[dict], dict]:
        # Self figures per module key: all dispatches, then the backward part of them.
        self_n: dict[int, int] = defaultdict(int)
        self_t: dict[int, float] = defaultdict(float)
        back_n: dict[int, int] = defaultdict(int)
        back_t: dict[int, float] = defaultdict(float)
        for (_, _, module, backward), root in self.pairs:
            if module is not None:
                time_us = self.time_us(root)
                self_n[module] += 1
                self_t[module] += time_us
                if backward:
                    back_n[module] += 1
                    back_t[module] += time_us
        calls: dict[int, int] = defaultdict(int)
        for event in self.events:
            if event.name.startswith(MODULE_LABEL):
                calls[int(event.name[len(MODULE_LABEL) :])] += 1
        total_t, total_n = self._totals(self_t), self._totals(self_n)
        total_bt, total_bn = self._totals(back_t), self._totals(back_n)
        ranked = sorted(self.info, key=lambda k: (-total_t.get(k, 0.0), k))
        kept = set(ranked[:limit])
        for key in list(kept):
            parent = self.info[key].parent
            while parent is not None and parent not in kept:
                kept.add(parent)
                parent = self.info[parent].parent
        rows = []
        for key in sorted(kept):  # first-call order: a tree's preorder
            info = self.info[key]
            source = None
            if info.source is not None:
                source = {"path": self.kinds.display(info.source[0]), "line": info.source[1]}
            rows.append({
                "name": info.name,
                "type": info.type,
                "type_path": info.type_path,
                "source": source,
                "parent": self.info[info.parent].name if info.parent is not None else None,
                "calls_per_step": calls.get(key, 0) / self.attr_steps,
                "dispatches_per_step": self_n.get(key, 0) / self.steps,
                "total_dispatches_per_step": total_n.get(key, 0) / self.steps,
                "self_time_per_step_us": self_t.get(key, 0.0) / self.steps,
                "total_time_per_step_us": total_t.get(key, 0.0) / self.steps,
                # The backward of the nodes this module's forward made, inside the figures above.
                "backward_dispatches_per_step": back_n.get(key, 0) / self.steps,
                "total_backward_dispatches_per_step": total_bn.get(key, 0) / self.steps,
                "backward_self_time_per_step_us": back_t.get(key, 0.0) / self.steps,
                "total_backward_time_per_step_us": total_bt.get(key, 0.0) / self.steps,
                "caller": self._site(info.caller),
                "called_from": self._frame(info.called_from),
            })  # fmt: skip
        rest = [k for k in self.info if k not in kept]
        return rows, {
            "count": len(rest),
            "calls_per_step": sum(calls.get(k, 0) for k in rest) / self.attr_steps,
            "dispatches_per_step": sum(self_n.get(k, 0) for k in rest) / self.steps,
            "self_time_per_step_us": sum(self_t.get(k, 0.0) for k in rest) / self.steps,
            "backward_dispatches_per_step": sum(back_n.get(k, 0) for k in rest) / self.steps,
            "backward_self_time_per_step_us": sum(back_t.get(k, 0.0) for k in rest) / self.steps,
        }

    def _totals(self, own: dict) -> dict:
        """Each module's own figure plus all its descendants' (a module calling itself: once)."""
        total = dict(own)
        for key in self.info:
            parent = self.info[key].parent
            seen = set()
            while parent is not None and parent not in seen:
                seen.add(parent)
                total[parent] = total.get(parent, 0) + own.get(key, 0)
                parent = self.info[parent].parent
        return total

    def backward_roots(self) -> set[int]:
        """ids of the paired dispatch roots (``pairs``) that the autograd engine ran."""
        return {id(root) for where, root in self.pairs if where[3]}

    def library_files(self) -> list[dict]:
        """Every file outside the project that made a dispatch or defines a called module's
        forward, unbounded (a handful of files even for a 32-layer model): what the static rules
        can read after the run."""
        files = {where[0][0] for where, _ in self.pairs if where[0] is not None}
        files.update(info.source[0] for info in self.info.values() if info.source is not None)
        return [
            {"path": self.kinds.display(f), "library": library_of(f)}
            for f in sorted(files)
            if self.kinds.kind(f) != "project" and not f.startswith("<")
        ]

    def host_syncs(self, backend_name: str) -> list[dict]:
        """Each op that makes the host wait, outermost of its kind, grouped by op, innermost frame
        and project line, counted per attributed step."""
        found: dict = defaultdict(lambda: [0, 0.0])
        for event in self.events:
            op = _sync_op(event, backend_name)
            if op is None or any(_sync_op(a, backend_name) for a in _ancestors(event)):
                continue
            innermost, project, _, _ = self.where(event)
            if innermost is None and project is None:
                continue  # trnlens's own synchronisation after each step
            entry = found[(op, innermost, project)]
            entry[0] += 1
            entry[1] += event.cpu_time_total
        rows = []
        for (op, innermost, project), (count, time_us) in found.items():
            rows.append({
                "op": op,
                "count_per_step": count / self.attr_steps,
                "time_per_step_us": time_us / self.attr_steps,
                "frame": self._frame(innermost),
                "caller": self._site(project),
            })  # fmt: skip
        rows.sort(key=lambda r: -r["count_per_step"])
        return rows


def _ancestors(event):
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def _sync_op(event, backend_name: str) -> str | None:
    name = event.name
    if name in SYNC_OPS:
        return name
    if name in DEVICE_SYNCS:
        return name
    if name in COPY_OPS and backend_name != "cpu" and _copies_to_host(event):
        return name
    return None


def _copies_to_host(event) -> bool:
    """A copy whose kernels (or its children's) move memory device -> host (CUDA's "Memcpy DtoH";
    on the CPU backend every tensor is on the host and no copy counts)."""
    stack = [event]
    while stack:
        current = stack.pop()
        for kernel in getattr(current, "kernels", None) or []:
            text = getattr(kernel, "name", str(kernel))
            if "DtoH" in text or "Device -> Host" in text or "D2H" in text:
                return True
        stack.extend(current.cpu_children)
    return False


def host_sync_findings(rows: list[dict], step_us: float, backend_name: str) -> list[dict]:
    """A measured finding per host sync site, at the project line that led there (the finding's
    path/line) with the innermost frame (library code included) in ``details.frame``."""
    found = []
    for row in rows:
        frame, caller = row["frame"], row["caller"]
        where = caller or frame
        at = f" in {frame['library']['name']} ({_short(frame['path'])}:{frame['line']})" if (
            frame and frame["library"]) else ""  # fmt: skip
        cpu_note = (
            " On the CPU backend the host is the device: this costs little here, but on an "
            "accelerator it stalls the device every time"
            if backend_name == "cpu"
            else ""
        )
        share = row["time_per_step_us"] / step_us if step_us > 0 else 0.0
        found.append({
            "id": "host-sync",
            "message": (
                f"host sync: {row['op']} {row['count_per_step']:g}x per step{at}: the host "
                "waits until the device has finished all queued work to read a value back."
                + cpu_note
            ),
            "op": row["op"],
            "time_us": row["time_per_step_us"],
            "share": min(share, 1.0),
            "path": where["path"] if where else None,
            "line": where["line"] if where else None,
            "matcher": "trnlens",
            "fix": None,
            "details": {"count_per_step": row["count_per_step"], "frame": frame,
                        "caller": caller},
        })  # fmt: skip
    return found


def _short(path: str) -> str:
    marker = "-packages/"
    return path.split(marker, 1)[1] if marker in path else path
