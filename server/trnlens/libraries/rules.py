"""The static rules on the library code a run executed, each finding with the run's measured cost.

A run's attribution pass names the frames it saw outside the project (``frames``: absolute
paths, with the library and version) and the ``nn.Module`` tree (``modules``: each type's source
file). After the run, on the server's side and off the language server's event loop (``jobs``
calls :func:`attach` in a worker thread before the run is stored), those files are read as text
and analysed like project code: never imported, each file analysed once per content hash. A
finding counts only where the run measured its function (dispatches on its lines, or calls of
its class): a naive pattern that never ran costs nothing. Each one becomes an entry of
``result["library_findings"]``, at the library line, with the project lines that called it and
the figures that say what it cost::

    LlamaRMSNorm (transformers 4.57.6, modeling_llama.py:62) is a naive RMSNorm: 8 dispatches
    a call, 5 calls, 40 of 151 per step

A local run's files are read where they are. A remote run's are read from the local cache of
the texts its agent sent by digest (``texts.py``): a remote host's site-packages may hold other
versions than this machine's, so its own files, never the same paths here, are analysed.
"""

from __future__ import annotations

import ast
import hashlib
import os
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from trnlens.agent import sources
from trnlens.agent.protocol import LIBRARY_FILE_MAX_BYTES
from trnlens.analysis import Finding, analyse_source
from trnlens.analysis.model import NOT_TIMED
from trnlens.analysis.rules import SYNTAX_CODE
from trnlens.analysis.source import decode

# What each fused-op rule found, as the sentence's noun.
PHRASES = {
    "TRN001": "a naive RMSNorm",
    "TRN002": "a naive LayerNorm",
    "TRN003": "a naive softmax",
    "TRN004": "a naive GELU",
    "TRN005": "a naive SiLU",
    "TRN006": "a naive attention",
}
MAX_FINDINGS = 50  # bounded like the frames and modules they come from
MAX_CALLERS = 5
# Library files bigger than this are not analysed (the engine's limit is far above any model
# file; this keeps a run's post-processing short when a frame points into a generated blob). The
# same bound says which files a remote agent sends (agent/protocol.py).
MAX_FILE_BYTES = LIBRARY_FILE_MAX_BYTES
# How a library file's bytes are read: ``path`` -> its bytes (None: unreadable or too big).
Reader = Callable[[str], bytes | None]


@dataclass(frozen=True)
class AnalysedFile:
    findings: tuple[Finding, ...]
    spans: dict[str, tuple[int, int]]  # qualname -> (def line, end line), 1-based
    sha256: str  # of the file's bytes as read


class _Cache:
    """Analysed library files by the sha256 of their bytes (a thread-safe LRU)."""

    def __init__(self, size: int = 256) -> None:
        self._data: OrderedDict[str, AnalysedFile] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: str) -> AnalysedFile | None:
        with self._lock:
            found = self._data.get(key)
            if found is not None:
                self._data.move_to_end(key)
            return found

    def put(self, key: str, value: AnalysedFile) -> None:
        with self._lock:
            self._data[key] = value
            while len(self._data) > self._size:
                self._data.popitem(last=False)


_CACHE = _Cache()


def read_local(path: str) -> bytes | None:
    """A file of this machine, or None when unreadable or over the bound."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_FILE_BYTES else None


def analysed_file(path: str, read: Reader = read_local) -> AnalysedFile | None:
    """The rules' findings in one file and its functions' spans; None when it cannot be read."""
    data = read(path)
    if data is None or len(data) > MAX_FILE_BYTES:
        return None
    key = hashlib.sha256(data).hexdigest()
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    text = decode(data).text
    findings = [f for f in analyse_source(text, path) if f.code != SYNTAX_CODE and f.qualname]
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    spans = {
        qualname: (node.lineno, node.end_lineno or node.lineno)
        for qualname, node, _ in sources.iter_definitions(tree)
    }
    found = AnalysedFile(tuple(findings), spans, key)
    _CACHE.put(key, found)
    return found


def attach(result: dict, read: Reader = read_local) -> None:
    """Adds ``library_findings`` to a result whose attribution pass saw library code, its
    library files read with ``read`` (this machine's by default)."""
    if result.get("error") or not (
        result.get("frames") or result.get("modules") or result.get("library_files")
    ):
        return
    digests: dict[str, str] = {}
    result["library_findings"] = library_findings(result, digests, read)
    # What each library file held when it was read: the editor marks a file changed since stale.
    result["library_digests"] = digests


def library_findings(
    result: dict, digests: dict[str, str] | None = None, read: Reader = read_local
) -> list[dict]:
    """The measured findings; ``digests`` gets each analysed file's sha256."""
    frames_by_file: dict[str, list[dict]] = defaultdict(list)
    libraries: dict[str, dict] = {}
    for frame in result.get("frames") or []:
        path = frame.get("path")
        if frame.get("project") or not isinstance(path, str) or not os.path.isabs(path):
            continue
        frames_by_file[path].append(frame)
        if frame.get("library"):
            libraries.setdefault(path, frame["library"])
    modules = result.get("modules") or []
    # Every library file the run executed (library_files: not cut to the top N, unlike frames),
    # and what the frames and the modules' sources name.
    named = [(m.get("source") or {}).get("path") for m in modules]
    for entry in result.get("library_files") or []:
        named.append(entry.get("path"))
        if entry.get("library") and isinstance(entry.get("path"), str):
            libraries.setdefault(entry["path"], entry["library"])
    files = set(frames_by_file) | {p for p in named if isinstance(p, str) and os.path.isabs(p)}
    totals = _Totals.of(result)
    found = []
    for path in sorted(files):
        analysed = analysed_file(path, read)
        if analysed is None:
            continue
        if digests is not None:
            digests[path] = analysed.sha256
        for finding in analysed.findings:
            entry = _measured(
                finding, path, analysed, frames_by_file[path], modules,
                libraries.get(path), totals,
            )  # fmt: skip
            if entry is not None:
                found.append(entry)
    found.sort(key=lambda e: (-e["dispatches_per_step"], -(e["time_per_step_us"] or 0)))
    return found[:MAX_FINDINGS]


@dataclass(frozen=True)
class _Totals:
    dispatches: float | None  # the headline pass's dispatches per step
    time_us: float  # all attributed frame time per step (the frames plus the rest)
    frames_cut: bool  # some frames were aggregated into frames_rest
    swapped: frozenset[tuple[str, str]]  # (type_path, method) a swap variant replaced

    @classmethod
    def of(cls, result: dict) -> _Totals:
        frames = result.get("frames") or []
        rest = result.get("frames_rest") or {}
        time_us = sum(f.get("self_time_per_step_us") or 0 for f in frames)
        time_us += rest.get("self_time_per_step_us") or 0
        swapped = frozenset(
            (str(s.get("type_path")), str(s.get("method")))
            for s in (result.get("variant") or {}).get("swaps") or []
        )
        return cls(result.get("dispatches_per_step"), time_us, bool(rest.get("count")), swapped)


def owner_class(qualname: str) -> str | None:
    """``LlamaRMSNorm`` for ``LlamaRMSNorm.forward``; None for a module-level function."""
    owner, _, _ = qualname.rpartition(".")
    return owner or None


def _owner_modules(owner: str | None, modules: list[dict], path: str) -> list[dict]:
    """The modules of class ``owner`` defined in the file at ``path``: by the class's import
    path (``pkg.mod.Owner`` is defined in ``pkg/mod.py`` or ``pkg/mod/__init__.py``), not by
    the module's ``source``, which names a decorator's wrapper when ``forward`` is wrapped."""
    if owner is None:
        return []
    name = owner.rsplit(".", 1)[-1]
    posix = path.replace(os.sep, "/")
    found = []
    for module in modules:
        type_path = str(module.get("type_path") or "")
        if module.get("type") != name or not type_path.endswith("." + owner):
            continue
        home = type_path[: -len(owner) - 1].replace(".", "/")
        if posix.endswith(f"/{home}.py") or posix.endswith(f"/{home}/__init__.py"):
            found.append(module)
    return found


def _measured(
    finding: Finding,
    path: str,
    analysed: AnalysedFile,
    frames: list[dict],
    modules: list[dict],
    library: dict | None,
    totals: _Totals,
) -> dict | None:
    qualname = finding.qualname or ""
    span = analysed.spans.get(qualname)
    if span is None:
        return None
    first, last = span
    inside = [f for f in frames if first <= int(f.get("line") or 0) <= last]
    owner = owner_class(qualname)
    owned = _owner_modules(owner, modules, path)
    method = qualname.rsplit(".", 1)[-1]
    if any((str(m.get("type_path")), method) in totals.swapped for m in owned):
        return None  # this run measured the method swapped for its fix: its code did not run
    # Both directions (schema 4): a frame's and a module's figures include the backward of the
    # autograd nodes their forward ops made; ``backward`` is that part.
    dispatches = sum(f.get("dispatches_per_step") or 0 for f in inside)
    backward = sum(f.get("backward_dispatches_per_step") or 0 for f in inside)
    time_us = sum(f.get("self_time_per_step_us") or 0 for f in inside)
    if not inside and owned and totals.frames_cut:
        # Its lines may have fallen out of the top frames (into frames_rest): the class's
        # modules' own dispatches stand in.
        dispatches = sum(m.get("dispatches_per_step") or 0 for m in owned)
        backward = sum(m.get("backward_dispatches_per_step") or 0 for m in owned)
        time_us = sum(m.get("self_time_per_step_us") or 0 for m in owned)
    if not dispatches:
        return None  # never ran in this run (or ran without a dispatch): nothing measured
    calls = sum(m.get("calls_per_step") or 0 for m in owned) if owned else None
    callers = _callers(inside, owned)
    library = library or _library_of(owned)
    row = finding.location.row
    name = owner or qualname
    # Named by the def line of the method (what a reader looks for), placed at the pattern's.
    where = f"{_library_text(library)}, {os.path.basename(path)}:{first}"
    of_total = f" of {_number(totals.dispatches)}" if totals.dispatches else ""
    if calls and backward:  # "per call" holds for both directions: "16.8 backward" is a count
        cost = (
            f"{_number((dispatches - backward) / calls)} dispatches forward and "
            f"{_number(backward / calls)} backward per call, {_plural(calls, 'call')}, "
            f"{_number(dispatches)}{of_total} per step"
        )
    elif calls:
        cost = (
            f"{_plural(dispatches / calls, 'dispatch')} a call, {_plural(calls, 'call')}, "
            f"{_number(dispatches)}{of_total} per step"
        )
    else:
        both = f" ({_number(backward)} of them backward)" if backward else ""
        cost = f"{_number(dispatches)}{of_total} dispatches per step{both}"
    phrase = PHRASES.get(finding.code)
    if phrase:
        message = f"{name} ({where}) is {phrase}: {cost}"
    else:  # the rule's own sentence ("`beta1` does not change in the loop but ..."), whole
        said = finding.message.removesuffix(NOT_TIMED).split("; ")[0].rstrip(" .")
        message = f"{name} ({where}): {said}; measured {cost}"
    entry = {
        "code": finding.code,
        "message": message,
        "static_message": finding.message.removesuffix(NOT_TIMED),
        "severity": finding.severity,
        "library": library,
        "path": path,
        "line": row,
        "end_line": finding.end_location.row,
        "def_line": first,
        "qualname": qualname,
        "owner": owner,
        "type_path": owned[0].get("type_path") if owned else None,
        "module_names": [m.get("name") for m in owned][:MAX_CALLERS],
        "calls_per_step": calls,
        "dispatches_per_call": dispatches / calls if calls else None,
        "dispatches_per_step": dispatches,
        "backward_dispatches_per_step": backward,
        "time_per_step_us": time_us,
        "share": time_us / totals.time_us if totals.time_us else None,
        "callers": callers,
        "fix": _swap(finding, owner, owned),
    }
    return entry


def _callers(inside: list[dict], owned: list[dict]) -> list[dict]:
    """The project lines that led to the finding's code, most dispatches first."""
    counts: dict[tuple[str, int], float] = defaultdict(float)
    for frame in inside:
        for caller in frame.get("callers") or []:
            if caller.get("path") and caller.get("line"):
                key = (caller["path"], int(caller["line"]))
                counts[key] += caller.get("dispatches_per_step") or 0
    if not counts:
        for module in owned:
            caller = module.get("caller") or {}
            if caller.get("path") and caller.get("line"):
                key = (caller["path"], int(caller["line"]))
                counts[key] += module.get("dispatches_per_step") or 0
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_CALLERS]
    return [{"path": p, "line": n, "dispatches_per_step": d} for (p, n), d in ranked]


def _swap(finding: Finding, owner: str | None, owned: list[dict]) -> dict | None:
    """A module swap for a method of a class whose instances ran: its fixed source stands in
    for the method on every instance of that exact class (see ``libraries/swap.py``)."""
    if owner is None or not finding.variant_source or not owned or not finding.fix:
        return None
    type_path = owned[0].get("type_path")
    if not type_path or finding.fix.applicability != "safe":
        return None
    return {
        "kind": "module-swap",
        "type_path": type_path,
        "method": (finding.qualname or "").rsplit(".", 1)[-1],
        "source": finding.variant_source,
        "message": finding.fix.message,
    }


def _library_of(modules: list[dict]) -> dict | None:
    for module in modules:
        type_path = module.get("type_path")
        if type_path:
            return {"name": type_path.split(".", 1)[0], "version": None}
    return None


def _library_text(library: dict | None) -> str:
    if not library:
        return "library"
    version = library.get("version")
    return f"{library.get('name')} {version}" if version else str(library.get("name"))


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def _plural(n: float, noun: str) -> str:
    """``1 call``, ``5 calls``, ``1.5 dispatches``: the noun agrees with the figure."""
    plural = noun + ("es" if noun.endswith(("ch", "sh", "s", "x")) else "s")
    return f"{_number(n)} {noun if _number(n) == '1' else plural}"
