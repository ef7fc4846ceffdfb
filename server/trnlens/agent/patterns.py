"""Pattern checks over the headline pass's events: what the run saw, at the line it came from.

After the headline pass, the events of the profiled steps are searched for known anti-patterns.
Each finding carries the op that shows it, its measured time per step and share of the step, and
the innermost project line that dispatched it (the line-attribution pass, ``lines.py``).

Where the torch in use ships a matcher for a pattern (``torch.profiler._pattern_matcher``,
"TorchTidy") and that matcher applies to the events we record, it is used: feature-detected, its
``match`` run over the kineto event tree inside ``on_trace_ready``. Its ``skip`` is bypassed on
purpose: it asks for ``with_stack`` because its *report* prints a Python source location, but
``match`` of the patterns used here reads only names, shapes and dtypes, and the headline pass
records no Python stacks (they would add their cost to the headline figures). Torch's other
patterns match Python-function events (``_single_tensor_adam``, ``: zero_grad``,
``nn.Module: Conv2d``) that only ``with_stack`` records, so those checks are our own, over the
``record_function`` labels torch always emits (``Optimizer.step#SGD.step``,
``Optimizer.zero_grad#SGD.zero_grad``, ``enumerate(DataLoader)#...``) and the aten ops.

The launch-bound check always runs on eager code: the host's idle time between consecutive
dispatches as a share of the step, with the dispatches around the largest gaps. It becomes a
finding only when idle time dominates a step of many dispatches.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable

from . import events as ev

# Torch matcher classes used, by our id; detected by name, each may be missing in a given torch.
TORCH_PATTERNS = {
    "matmul-dim-not-multiple-of-8": ("MatMulDimInFP16Pattern", None),
    "fp32-matmul": ("FP32MatMulPattern", "cuda"),  # TF32 advice: CUDA only
    "extra-copy": ("ExtraCUDACopyPattern", "cuda"),
}
# Launch-bound: a step of many dispatches (a few with gaps between them is not a loop of tiny
# ops) where over half the step is overhead: idle time between dispatches, plus the time of
# dispatches of a kind (op and line) so small, 50 µs or less at its fastest, that their fixed
# cost is the work (on the CPU the profiler
# counts the dispatcher's own cost inside each op, so tiny ops show up as short ops more than as
# gaps). A mean over all dispatches would not do: a step of a few big ops and many views is not
# launch-bound, a small training step's optimizer adds per parameter are. Measured here on 2
# cores: a loop of 200 adds on 4 floats, 6-30 µs per dispatch (by load), idle 7-75% of the
# step, overhead about 100%; the samples' overhead under a few % (their time is in big ops).
LAUNCH_OVERHEAD_SHARE = 0.5
LAUNCH_MIN_DISPATCHES = 20
LAUNCH_TINY_DISPATCH_US = 50.0
LAUNCH_GAPS_SHOWN = 3
CONV_OPS = ("aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution")
BATCH_NORM_OPS = ("aten::batch_norm",)
OPTIMIZER_STEP = "Optimizer.step#"
ZERO_GRAD = "Optimizer.zero_grad#"
SYNC_LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def torch_matches(prof, torch, backend_name: str) -> tuple[list[tuple[str, str, float]], list[str]]:
    """(id, op name, start in µs from the trace start) per event torch's matchers match.

    Runs inside ``on_trace_ready`` (the kineto results live only there). Never raises: a matcher
    missing from this torch, or failing on it, costs only its own pattern (a warning says so).
    """
    try:
        from torch.profiler import _pattern_matcher as matcher
    except ImportError:
        return [], []
    found: list[tuple[str, str, float]] = []
    warnings: list[str] = []
    try:
        start_ns = prof.profiler.kineto_results.trace_start_ns()
    except AttributeError:
        return [], ["torch's pattern matcher: this torch's profiler results have no trace start"]
    for finding_id, (class_name, only_on) in TORCH_PATTERNS.items():
        cls = getattr(matcher, class_name, None)
        if cls is None or (only_on and only_on != backend_name):
            continue
        try:
            pattern = cls(prof)
            hits = [e for e in pattern.eventTreeTraversal() if pattern.match(e)]
        except Exception as exc:  # a private API: its shape may change under us
            warnings.append(f"torch's {class_name} failed on this torch ({exc}); skipped")
            continue
        for event in hits:
            found.append((finding_id, event.name, (event.start_time_ns - start_ns) / 1000))
    return found, warnings


class Checker:
    """Findings over one headline pass: events, the sites of their dispatch roots, the step time."""

    def __init__(
        self,
        events: list,
        sites: dict[int, tuple[str, int]],
        time_us: Callable,
        step_us: float,
    ):
        self.events = [e for e in events if not ev.is_bookkeeping(e)]
        self.steps = sorted(ev.step_events(events), key=lambda e: e.time_range.start)
        self.n_steps = max(len(self.steps), 1)
        self.roots = ev.dispatch_roots(self.events)
        self._root_ids = {id(r) for r in self.roots}
        self.per_step = ev.roots_by_step(events)  # each step's dispatch roots, in order
        self.sites = sites
        self.time_us = time_us
        self.step_us = step_us

    # -- where an event came from
    def root_of(self, event):
        if id(event) in self._root_ids:
            return event
        parent = event.cpu_parent
        while parent is not None:
            if id(parent) in self._root_ids:
                return parent
            parent = parent.cpu_parent
        return None

    def site_of(self, event) -> tuple[str, int] | None:
        """The line of the dispatch that ran ``event`` (or, for a label over several dispatches
        such as an optimizer step, of the first dispatch under it)."""
        root = self.root_of(event)
        if root is not None:
            return self.sites.get(id(root))
        for child in _descendants(event):
            if id(child) in self._root_ids and id(child) in self.sites:
                return self.sites[id(child)]
        return None

    # -- building findings
    def finding(self, finding_id, events, message, *, matcher="trnlens", fix=None, details=None):
        """One finding per (pattern, line): the events' time summed, per step."""
        time_us = sum(self.time_us(e) for e in events) / self.n_steps
        where = self.site_of(events[0])
        share = time_us / self.step_us if self.step_us > 0 else 0.0
        return {
            "id": finding_id,
            "message": message,
            "op": events[0].name,
            "time_us": time_us,
            "share": min(share, 1.0),
            "path": where[0] if where else None,
            "line": where[1] if where else None,
            "matcher": matcher,
            "fix": fix,
            "details": details or {},
        }

    def by_site(self, events) -> list[list]:
        groups: dict = defaultdict(list)
        for event in events:
            groups[self.site_of(event)].append(event)
        return list(groups.values())

    # -- the checks
    def optimizer_single_tensor(self) -> list[dict]:
        found = []
        for group in self.by_site(e for e in self.events if e.name.startswith(OPTIMIZER_STEP)):
            kinds = {d.name for e in group for d in _descendants(e)}
            if any("_foreach_" in k or "_fused_" in k for k in kinds):
                continue
            dispatches = sum(
                1 for e in group for d in _descendants(e) if id(d) in self._root_ids
            ) / len(group)
            if dispatches < 2:
                continue
            name = group[0].name.split("#", 1)[1].split(".")[0]
            found.append(
                self.finding(
                    "optimizer-single-tensor",
                    group,
                    f"{name} ran its single-tensor (for-loop) implementation: "
                    f"{dispatches:g} dispatches per step, one per op per parameter; "
                    f"{name}(..., foreach=True) updates all parameters with one dispatch per op",
                    fix="foreach",
                    details={"optimizer": name, "dispatches": dispatches},
                )
            )
        return found

    def grad_not_set_to_none(self) -> list[dict]:
        found = []
        for group in self.by_site(e for e in self.events if e.name.startswith(ZERO_GRAD)):
            zeroing = [
                d
                for e in group
                for d in _descendants(e)
                if d.name in ("aten::zero_", "aten::_foreach_zero_", "aten::fill_")
            ]
            if not zeroing:
                continue
            found.append(
                self.finding(
                    "grad-not-set-to-none",
                    group,
                    "zero_grad fills every gradient with zeros "
                    f"({len(zeroing) / self.n_steps:g} zeroing ops per step); "
                    "zero_grad(set_to_none=True) drops them instead: no memset, and backward "
                    "writes fresh gradients",
                    fix="set_to_none",
                    details={"zeroing_ops": len(zeroing) / self.n_steps},
                )
            )
        return found

    def conv_bias_before_batchnorm(self) -> list[dict]:
        hits = []
        for step_roots in self.per_step or [self.roots]:
            for index, conv in enumerate(step_roots):
                if conv.name not in CONV_OPS:
                    continue
                # The next dispatch on tensors (BatchNorm's num_batches_tracked += 1 is a scalar
                # op between the two in training).
                nxt = next((r for r in step_roots[index + 1 :] if not _scalar_only(r)), None)
                if nxt is None or nxt.name not in BATCH_NORM_OPS:
                    continue
                shapes = getattr(conv, "input_shapes", None) or []
                bn_shapes = getattr(nxt, "input_shapes", None) or []
                has_bias = len(shapes) > 2 and bool(shapes[2])
                weight = shapes[1] if len(shapes) > 1 else []
                feeds = bool(weight and bn_shapes and len(bn_shapes[0]) > 1)
                if has_bias and feeds and bn_shapes[0][1] == weight[0]:
                    hits.append(conv)
        found = []
        for group in self.by_site(hits):
            found.append(
                self.finding(
                    "conv-bias-before-batchnorm",
                    group,
                    "a convolution with a bias feeds BatchNorm, which subtracts the mean at once: "
                    "the bias is computed and then cancelled; build the conv with bias=False",
                    fix="conv_bias",
                    details={"input_shapes": getattr(group[0], "input_shapes", None)},
                )
            )
        return found

    def sync_data_loader(self) -> list[dict]:
        found = []
        for group in self.by_site(e for e in self.events if e.name.startswith(SYNC_LOADER)):
            found.append(
                self.finding(
                    "sync-data-loader",
                    group,
                    "the DataLoader loads batches in the training process (num_workers=0): "
                    "the step waits for each batch; DataLoader(..., num_workers=N) loads them "
                    "in worker processes meanwhile",
                    fix="num_workers",
                )
            )
        return found

    def from_torch(self, matches: list[tuple[str, str, float]]) -> list[dict]:
        index: dict = defaultdict(list)
        for event in self.events:
            index[event.name].append(event)
        hits: dict[str, list] = defaultdict(list)
        for finding_id, name, start_us in matches:
            for event in index.get(name, ()):
                if abs(event.time_range.start - start_us) < 0.5:
                    hits[finding_id].append(event)
                    break
        found = []
        for finding_id, events in hits.items():
            for group in self.by_site(events):
                found.append(self._torch_finding(finding_id, group))
        return found

    def _torch_finding(self, finding_id, group) -> dict:
        shapes = getattr(group[0], "input_shapes", None)
        if finding_id == "matmul-dim-not-multiple-of-8":
            message = (
                f"a half-precision matmul ({group[0].name} {_shape_text(shapes)}) has a "
                "dimension that is not a multiple of 8: matrix units work on tiles of 8 (or "
                "more); padding the dimension to a multiple of 8 lets them run full tiles"
            )
        elif finding_id == "fp32-matmul":
            message = (
                "a float32 matmul on a GPU that has TF32: "
                "torch.backends.cuda.matmul.allow_tf32 = True trades precision for speed"
            )
        else:
            message = "a copy between devices that could be avoided (created on the device?)"
        return self.finding(
            finding_id, group, message, matcher="torch", details={"input_shapes": shapes}
        )

    def launch(self) -> dict | None:
        """Idle time between consecutive dispatches as a share of each step's dispatching
        (its first dispatch to the end of its last)."""
        per_step = self.per_step
        if not per_step or not any(per_step):
            return None
        shares, idles, durations, sizes, overheads = [], [], [], [], []
        first_gaps: list[tuple] = []  # the first step's (gap, dispatch before, dispatch after)
        # A dispatch is tiny by what its kind (op and line) takes at its fastest over the
        # window, not by its own duration nor by the kind's median: on a loaded machine the OS
        # preempts tiny adds mid-op, so many that a loop of 200 adds had a median over 50 µs
        # beside two busy processes and four test processes on 2 cores (judged one by one, they
        # fell under the bar at load 15). An op that is real work is never fast.
        fastest, typical = self._dispatch_us([r for roots in per_step for r in roots])
        for step, roots in zip(self.steps, per_step, strict=False):
            # From the step's first dispatch to the end of its last: before and after them the
            # step is the function's call and return and the profiler's step boundary, where a
            # busy machine parks the thread for milliseconds (4-6 ms after the 200th add of a
            # 0.5 ms loop, beside six busy processes on 2 cores): not issuing ops.
            duration = (
                max(r.time_range.end for r in roots) - roots[0].time_range.start
                if roots
                else step.time_range.end - step.time_range.start
            )
            if roots:  # each step's mean; their median shrugs off a step the OS preempted
                sizes.append(statistics.fmean(r.time_range.end - r.time_range.start for r in roots))
            gaps = []
            for before, after in zip(roots, roots[1:], strict=False):
                gap = after.time_range.start - max(before.time_range.end, before.time_range.start)
                gaps.append((max(gap, 0.0), before, after))
            idle = sum(g for g, _, _ in gaps)
            # A tiny kind's dispatch counts at most its kind's typical time; what one took
            # beyond that (the OS preempted it, or a one-off: a zero_ of a fresh buffer took
            # 7.7 ms where its kind takes 0.5 µs) is neither overhead nor the step's work, so it
            # leaves the step too: a compute-bound training step read as 34-40% overhead under
            # load when such a dispatch counted whole.
            tiny = excess = 0.0
            for r in roots:
                if fastest[self._kind(r)] <= LAUNCH_TINY_DISPATCH_US:
                    usual = typical[self._kind(r)]
                    took = r.time_range.end - r.time_range.start
                    tiny += min(took, usual)
                    excess += max(took - usual, 0.0)
            if duration > 0:
                shares.append(idle / duration)
                overheads.append(min((idle + tiny) / max(duration - excess, 1e-9), 1.0))
                idles.append(idle)
                durations.append(duration)
            if not first_gaps:
                first_gaps = gaps
        if not shares:
            return None
        largest = sorted(first_gaps, key=lambda g: -g[0])[:LAUNCH_GAPS_SHOWN]
        return {
            "idle_share": statistics.median(shares),
            "idle_share_min": min(shares),
            "idle_share_max": max(shares),
            "idle_us": statistics.median(idles),
            "step_us": statistics.median(durations),
            "dispatches": len(self.roots) / self.n_steps,
            "mean_dispatch_us": statistics.median(sizes) if sizes else 0.0,
            "overhead_share": statistics.median(overheads),
            "gaps": [
                {"gap_us": g, "before": self._dispatch(b), "after": self._dispatch(a)}
                for g, b, a in largest
            ],
        }

    def _kind(self, root) -> tuple:
        return (root.name, self.sites.get(id(root)))

    def _dispatch_us(self, roots) -> tuple[dict, dict]:
        """The shortest and the median duration of each kind of dispatch (op and line) over
        the window."""
        durations: dict = defaultdict(list)
        for root in roots:
            durations[self._kind(root)].append(root.time_range.end - root.time_range.start)
        return (
            {kind: min(values) for kind, values in durations.items()},
            {kind: statistics.median(values) for kind, values in durations.items()},
        )

    def _dispatch(self, root) -> dict:
        where = self.sites.get(id(root))
        return {"op": root.name, "path": where[0] if where else None,
                "line": where[1] if where else None}  # fmt: skip

    def launch_finding(self, launch: dict | None) -> list[dict]:
        if not launch or launch["dispatches"] < LAUNCH_MIN_DISPATCHES:
            return []
        if launch["overhead_share"] < LAUNCH_OVERHEAD_SHARE:
            return []
        # The line: where most dispatches came from (a loop of tiny ops is one line).
        counts: dict = defaultdict(int)
        for root in self.roots:
            counts[self.sites.get(id(root))] += 1
        site = max(counts, key=lambda k: (k is not None, counts[k]))
        where = site or (None, None)
        per_line = counts[site] / self.n_steps
        return [
            {
                "id": "launch-bound",
                "message": (
                    f"launch-bound: {launch['dispatches']:g} dispatches per step "
                    f"({per_line:g} from this line), on average "
                    f"{launch['mean_dispatch_us']:.1f} µs each; "
                    f"{100 * launch['overhead_share']:.0f}% of the step's dispatching (its first "
                    "dispatch to its last) is overhead: "
                    f"{100 * launch['idle_share']:.0f}% between dispatches (median; "
                    f"{100 * launch['idle_share_min']:.0f}-{100 * launch['idle_share_max']:.0f}%"
                    " over the steps), the rest in dispatches of 50 µs or less at their "
                    "fastest. Issuing small ops is the bottleneck; batch the work into fewer, "
                    "larger ops (vectorise the loop) or torch.compile it"
                ),
                "op": _most_common(r.name for r in self.roots if self.sites.get(id(r)) == site),
                "time_us": launch["overhead_share"] * launch["step_us"],
                "share": launch["overhead_share"],
                "path": where[0],
                "line": where[1],
                "matcher": "trnlens",
                "fix": None,
                "details": {"dispatches_from_line": per_line},
            }
        ]


def check(events, sites, time_us, step_us, torch_found, *, eager: bool, patterns: bool = True):
    """All findings (sorted by measured share, largest first) and the launch figures (eager
    code); ``patterns=False``: the launch check alone."""
    checker = Checker(events, sites, time_us, step_us)
    found = []
    if patterns:
        found += checker.optimizer_single_tensor()
        found += checker.grad_not_set_to_none()
        found += checker.conv_bias_before_batchnorm()
        found += checker.sync_data_loader()
        found += checker.from_torch(torch_found)
    launch = checker.launch() if eager else None
    found += checker.launch_finding(launch)
    found.sort(key=lambda f: -f["share"])
    return found, launch


def _descendants(event):
    stack = list(event.cpu_children)
    while stack:
        child = stack.pop()
        yield child
        stack.extend(child.cpu_children)


def _scalar_only(event) -> bool:
    shapes = getattr(event, "input_shapes", None) or []
    return not any(shape for shape in shapes)


def _most_common(names) -> str:
    counts: dict[str, int] = defaultdict(int)
    for name in names:
        counts[name] += 1
    return max(counts, key=counts.__getitem__) if counts else ""


def _shape_text(shapes) -> str:
    if not shapes:
        return ""
    return " × ".join(str(list(s)) for s in shapes if s)
