"""What ``torch.compile`` did during one run: graph breaks, graphs, recompilations, compile time.

Collected only when the profiled variant is compiled, from what the torch in use already produces,
so that nothing about the measured run changes (no extra mode, no second trace, no config change:
docs/design.md; a changed compile config would even make a warm agent ask for a fresh process):

- compile time, graphs' op counts and the failed guard of each recompilation come from
  ``torch._dynamo.utils.get_compilation_metrics()``: the ``CompilationMetrics`` records dynamo
  keeps of every frame compile anyway (the records ``TORCH_TRACE``/tlparse show as
  ``compilation_metrics``); reading them costs nothing.
- graph breaks (reason, user stack) and each graph's ops come from the ``graph_breaks`` and
  ``graph_code`` artifacts of ``TORCH_LOGS``: their loggers are switched to DEBUG for the run
  only, with our handler alone (no propagation: nothing is printed), and put back afterwards.
  The break's text is Python's traceback format, from which the innermost *project* frame is
  taken; a graph's code is formatted only because our handler asks for it (that is most of the
  collection's cost, measured in ``collection_us``).

Rejected: ``torch._dynamo.explain`` traces the function a second time with its own backend (a
second compile, minutes on Neuron); ``CompileProfiler`` is a backend (it would replace the one
being measured); ``torch._logging.set_logs`` resets every other logging setting, ``TORCH_LOGS``
included; inductor's custom-pass hooks change the compile config (and its cache key).

Each piece is feature-detected: a torch without it gives a warning naming what is missing.
Phases: the first call, the rest of the warm-up, and the measured window (every later call).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

PHASES = ("first_call", "warmup", "measured")
MAX_DETAIL = 4000
_BREAK_HEAD = re.compile(r"in user code at (?P<path>.+?):(?P<line>\d+)\n")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)', re.M)
_GRAPH_NAME = re.compile(r"=====\s*(\S+)\s*=====")
_NODE = re.compile(r'^\s+(?P<name>\w+)(?::\s*"[^"]*")?\s*=\s*(?P<rhs>.+?)(?:;\s+.*)?$')
_CALL = re.compile(r"^(?:[\w.]+\.)?(?P<name>\w+)\(")
_BINARY = {
    "+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod",
    "**": "pow", "@": "matmul", ">": "gt", "<": "lt", ">=": "ge", "<=": "le", "==": "eq",
    "!=": "ne", "&": "and_", "|": "or_", "^": "xor",
}  # fmt: skip
_INFIX = re.compile(r"^\S+ (?P<op>\*\*|//|>=|<=|==|!=|[+\-*/%@<>&|^]) \S+$")
# Compiles of this process, by code identity: a warm agent that already compiled a function
# (its module unchanged) runs the cached code and compiles nothing; the run says so and shows
# what that compile found.
_EARLIER: dict[tuple, dict] = {}


class CompileLog:
    """Collects during one compiled variant's measurement. Use ``wrap(step)`` for the calls, then
    ``finish()`` for the result's ``compile`` field."""

    def __init__(self, torch, is_project_file: Callable[[str], bool], relpath, warmup: int):
        self.torch = torch
        self.is_project_file = is_project_file
        self.relpath = relpath
        self.warmup = max(warmup, 1)  # the first call is a warm-up call too
        self.calls = 0
        self.phase = PHASES[0]
        self.warnings: list[str] = []
        self.breaks: list[dict] = []
        self.graph_texts: list[tuple[str, str | None, str]] = []  # (phase, compile id, text)
        self.metrics: list[tuple[str, Any]] = []  # (phase, CompilationMetrics)
        self.overhead_s = 0.0
        self._loggers: list[tuple[logging.Logger, int, bool]] = []
        self._handler: logging.Handler | None = None
        self._get_metrics = None
        self._seen: set[int] = set()
        self._started = False
        self._paused = False
        self._utils = None
        self._marker: tuple | None = None

    # -- lifetime
    def start(self) -> CompileLog:
        began = time.perf_counter()
        try:
            import torch._dynamo  # noqa: F401 - creates the artifact loggers
        except Exception as exc:  # a torch without dynamo: nothing to collect
            self.warnings.append(f"torch.compile details unavailable: torch._dynamo ({exc})")
            return self
        utils = getattr(self.torch._dynamo, "utils", None)
        self._get_metrics = getattr(utils, "get_compilation_metrics", None)
        self._utils = utils
        if self._get_metrics is None:
            self.warnings.append(
                "this torch has no torch._dynamo.utils.get_compilation_metrics: compile time, "
                "graph op counts and recompile guards are not reported"
            )
        else:
            self._seen = {id(m) for m in self._get_metrics()}
        self._handler = _Handler(self)
        found = {"graph_breaks": False, "graph_code": False}
        for name in list(logging.Logger.manager.loggerDict):
            artifact = name.rpartition(".__")[2] if ".__" in name else None
            if artifact not in found:
                continue
            found[artifact] = True
            logger = logging.getLogger(name)
            self._loggers.append((logger, logger.level, logger.propagate))
            logger.setLevel(logging.DEBUG)
            logger.propagate = False  # ours alone: the run prints nothing it did not before
            logger.addHandler(self._handler)
        for artifact, present in found.items():
            if not present:
                what = "graph breaks" if artifact == "graph_breaks" else "graphs' op names"
                self.warnings.append(
                    f"this torch has no {artifact!r} log artifact (TORCH_LOGS): {what} are "
                    "not reported"
                )
        self._started = True
        self.overhead_s += time.perf_counter() - began
        return self

    def stop(self) -> None:
        if not self._started or self._handler is None:
            return
        for logger, level, propagate in self._loggers:
            logger.removeHandler(self._handler)
            logger.setLevel(level)
            logger.propagate = propagate
        self._loggers.clear()
        self._started = False

    def pause(self) -> None:
        """Stop collecting: what compiles meanwhile is trnlens's doing (the attribution pass's
        mode and hooks make dynamo recompile), not the user's."""
        self._paused = True

    def resume(self) -> None:
        if self._get_metrics is not None:
            self._seen.update(id(m) for m in self._get_metrics())
        self._paused = False

    def wrap(self, step: Callable[[], Any]) -> Callable[[], Any]:
        """``step`` that tells which phase each call is in and collects what it compiled."""

        def observed():
            if self._paused:
                return step()
            self.calls += 1
            self.phase = (
                "first_call" if self.calls == 1 else "warmup" if self.calls <= self.warmup else
                "measured"
            )  # fmt: skip
            try:
                return step()
            finally:
                self._collect_metrics()

        return observed

    # -- collecting
    def _new_metrics_marker(self) -> tuple | None:
        """(length, last record) of dynamo's metrics deque, O(1), or None where this torch keeps
        it elsewhere. It runs inside every measured step now that the log is on for every run
        (a compiled callee compiles during an eager run too): copying the records each step would
        cost the headline figures; nothing new means nothing to scan."""
        records = getattr(self._utils, "_compilation_metrics", None)
        if records is None:
            return None
        try:
            return (len(records), id(records[-1]) if records else None)
        except TypeError:
            return None

    def _collect_metrics(self) -> None:
        if self._get_metrics is None:
            return
        marker = self._new_metrics_marker()
        if marker is not None and marker == self._marker:
            return
        self._marker = marker
        began = time.perf_counter()
        for m in self._get_metrics():
            if id(m) not in self._seen:
                self._seen.add(id(m))
                self.metrics.append((self.phase, m))
        self.overhead_s += time.perf_counter() - began

    def on_record(self, record: logging.LogRecord) -> None:
        if self._paused:
            return
        began = time.perf_counter()
        try:
            artifact = record.name.rpartition(".__")[2]
            if artifact == "graph_breaks":
                found = self._graph_break(record.getMessage())
                if found is not None:
                    self.breaks.append(found)
            elif artifact == "graph_code":
                self.graph_texts.append((self.phase, self._compile_id(), record.getMessage()))
        except Exception as exc:  # never let collection break the user's compile
            self.warnings.append(f"could not read a torch.compile log record: {exc}")
        finally:
            self.overhead_s += time.perf_counter() - began

    def _compile_id(self) -> str | None:
        guards = getattr(self.torch, "_guards", None)
        context = getattr(guards, "CompileContext", None)
        current = getattr(context, "current_compile_id", None)
        try:
            value = current() if current else None
        except Exception:
            return None
        return str(value) if value is not None else None

    def _graph_break(self, text: str) -> dict | None:
        head = _BREAK_HEAD.search(text)
        if head is None and "Graph break" not in text:
            return None
        reason_text = text.partition("Graph Break Reason:")[2] or text
        reason_text = reason_text.split("\nUser code traceback:", 1)[0]
        title, hints = summarize_reason(reason_text)
        # The user stack in Python's traceback format (a skipped frame's message has it too).
        stack = text.partition("User code traceback:")[2] or text.partition("user code:")[2]
        frames = [(m["path"], int(m["line"]), m["func"]) for m in _FRAME.finditer(stack)]
        project = [f for f in frames if self.is_project_file(f[0])]
        if project:
            path, line, func = project[-1]
        elif head is not None:
            path, line, func = head["path"], int(head["line"]), None
        elif frames:
            path, line, func = frames[-1]
        else:
            return None
        return {
            "path": self.relpath(path) if self.is_project_file(path) else path,
            "line": line,
            "function": func,
            "in_project": self.is_project_file(path),
            "reason": title,
            "hints": hints,
            "detail": reason_text.strip()[:MAX_DETAIL],
            "phase": self.phase,
        }

    # -- the result
    def finish(self, reuse_key: tuple | None = None) -> dict:
        self.stop()
        began = time.perf_counter()
        graphs = self._graphs()
        recompiles = self._recompiles()
        first = [m for phase, m in self.metrics if phase == "first_call"]
        out = {
            "graphs": graphs,
            "graphs_per_call": sum(1 for g in graphs if g["phase"] == "first_call"),
            "breaks": _unique_breaks(self.breaks),
            "recompiles": recompiles,
            "compile_time_us": _compile_time(first),
            "compiled_in_run": bool(self.metrics or self.graph_texts or self.breaks),
            "reused_from": None,
            "warnings": self.warnings,
        }
        if reuse_key is not None:
            if out["compiled_in_run"]:
                _EARLIER[reuse_key] = {k: out[k] for k in ("graphs", "graphs_per_call", "breaks",
                                                         "compile_time_us")}  # fmt: skip
                _EARLIER[reuse_key]["at"] = time.time()
            elif reuse_key in _EARLIER:
                earlier = _EARLIER[reuse_key]
                out.update({k: earlier[k] for k in ("graphs", "graphs_per_call", "breaks",
                                                   "compile_time_us")})  # fmt: skip
                out["reused_from"] = "an earlier run in this agent process"
                self.warnings.append(
                    "nothing was compiled during this run: this warm agent compiled the function "
                    "in an earlier run (its module did not change) and ran that code; graphs, "
                    "breaks and compile time are that compile's"
                )
        if not out["compiled_in_run"] and out["reused_from"] is None:
            self.warnings.append(
                "nothing was compiled during this run (the compiled code was already cached in "
                "this process): graphs, breaks and compile time are unknown"
            )
        self.overhead_s += time.perf_counter() - began
        out["collection_us"] = self.overhead_s * 1e6
        return out

    def _graphs(self) -> list[dict]:
        texts = list(self.graph_texts)
        by_id = {cid: (phase, text) for phase, cid, text in texts if cid}
        graphs = []
        used: set[int] = set()
        for phase, m in self.metrics:
            ops = getattr(m, "graph_op_count", None)
            if not ops:
                continue  # a frame that compiled to no graph (only Python, or a skipped frame)
            cid = str(getattr(m, "compile_id", None) or "")
            text = by_id.get(cid, (None, None))[1]
            if text is None:  # no compile id to join on: take the next unused text in order
                for i, (_, tid, t) in enumerate(texts):
                    if i not in used and not tid:
                        used.add(i)
                        text = t
                        break
            filename = getattr(m, "co_filename", None) or ""
            graphs.append({
                "compile_id": cid or None,
                "function": _user_name(getattr(m, "co_name", None)),
                "path": self.relpath(filename) if self.is_project_file(filename) else filename,
                "line": getattr(m, "co_firstlineno", None),
                "ops": ops,
                "op_names": op_names(text) if text else None,
                "phase": phase,
            })  # fmt: skip
        if not self.metrics and texts:  # no metrics API: graphs from their code alone
            for phase, text_cid, text in texts:
                names = op_names(text)
                graphs.append({"compile_id": text_cid, "function": None, "path": None, "line": None,
                               "ops": len(names), "op_names": names, "phase": phase})  # fmt: skip
        return graphs

    def _recompiles(self) -> list[dict]:
        found = []
        for phase, m in self.metrics:
            reason = getattr(m, "recompile_reason", None)
            if not reason:
                continue
            filename = getattr(m, "co_filename", None) or ""
            found.append({
                "compile_id": str(getattr(m, "compile_id", None) or "") or None,
                "function": _user_name(getattr(m, "co_name", None)),
                "path": self.relpath(filename) if self.is_project_file(filename) else filename,
                "line": getattr(m, "co_firstlineno", None),
                "guard": re.sub(r"^\d+/\d+: ", "", reason),
                "phase": phase,
            })  # fmt: skip
        return found


class _Handler(logging.Handler):
    def __init__(self, log: CompileLog):
        super().__init__(logging.DEBUG)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        self.log.on_record(record)


def summarize_reason(text: str) -> tuple[str, list[str]]:
    """(one-line reason, hints) from dynamo's graph break reason text: its title (the break's
    type) and its explanation, without the 'Encountered graph break when attempting to trace'
    preamble, the developer context and the link."""
    lines = [ln.strip() for ln in text.strip().splitlines()]
    lines = [ln for ln in lines if ln]
    if lines and lines[0].startswith("Encountered graph break"):
        lines = lines[1:]
    hints = [ln.removeprefix("Hint:").strip() for ln in lines if ln.startswith("Hint:")]
    explanation = next(
        (ln.removeprefix("Explanation:").strip() for ln in lines if ln.startswith("Explanation:")),
        None,
    )
    title = lines[0] if lines else "unknown reason"
    if explanation and explanation != title:
        title = f"{title}: {explanation}"
    return title, hints


def op_names(graph_code: str) -> list[str]:
    """The ops of one FX graph from its code as ``TORCH_LOGS=graph_code`` prints it, in order:
    ``torch.rsqrt(add)`` -> rsqrt, ``l_x_.pow(2)`` -> pow, ``mean + 1e-06`` -> add."""
    names = []
    body = graph_code.split("def forward", 1)[-1]
    for line in body.splitlines()[1:]:
        node = _NODE.match(line)
        if node is None:
            continue
        rhs = node["rhs"].strip()
        call = _CALL.match(rhs)
        if call is not None:
            names.append(call["name"])
            continue
        infix = _INFIX.match(rhs)
        if infix is not None:
            names.append(_BINARY[infix["op"]])
        elif re.match(r"^\w+\[.+\]$", rhs):
            names.append("getitem")
        elif rhs.startswith("-") and re.match(r"^-\w+$", rhs):
            names.append("neg")
    return names


def _user_name(co_name: str | None) -> str | None:
    """'f' for dynamo's resume function 'torch_dynamo_resume_in_f_at_19'."""
    if co_name and co_name.startswith("torch_dynamo_resume_in_"):
        return re.sub(r"_at_\d+$", "", co_name.removeprefix("torch_dynamo_resume_in_"))
    return co_name


def _unique_breaks(breaks: list[dict]) -> list[dict]:
    seen = set()
    out = []
    for b in breaks:
        key = (b["path"], b["line"], b["reason"])
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


def _compile_time(metrics: list) -> dict | None:
    """The first call's compile time, summed over its frame compiles: total (dynamo's whole
    frame compile), backend (AOTAutograd + the backend compiler), tracing the rest."""
    if not metrics:
        return None

    def total(name: str) -> float | None:
        found = [v for v in (getattr(m, name, None) for m in metrics) if v is not None]
        return float(sum(found)) if found else None

    entire = total("dynamo_cumulative_compile_time_us")
    backend = total("aot_autograd_cumulative_compile_time_us")
    return {
        "total_us": entire,
        "backend_us": backend,
        "inductor_us": total("inductor_cumulative_compile_time_us"),
        "tracing_us": entire - backend if entire is not None and backend is not None else None,
        "frames": len(metrics),
    }
