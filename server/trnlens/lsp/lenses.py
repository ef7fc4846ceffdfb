"""Code lenses: ``▶ Profile`` where a person would profile (see ``placement``), then its figures.

Shown only in files that import torch. After a run the lens reads the run's headline
(``▶ Profile · 105 ms CPU (ops) · 106 ms CPU · 6 dispatches · 2 min ago``); ``stale`` when the
function's source has changed since; the job's state while it is queued or running (clicking then
cancels it). With history, the change against the baseline follows the figures
(``−42% vs previous``).

Speed on big files: ``textDocument/codeLens`` answers from a per-document cache of the lenses'
JSON form (rebuilt only when the text, the placed runs, the pending jobs or the settings change).
A lens without figures carries its command (``▶ Profile``); a lens with figures or a job state
carries only ``data`` and gets its title from ``codeLens/resolve``, which editors send for the
lenses on screen only, so the figures are formatted for what the user sees.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from lsprotocol import types

from trnlens import rankfigures
from trnlens.lsp import compiled, format, memory, missing_inputs, run_findings, xla_figures
from trnlens.lsp.command_ids import CANCEL, PROFILE
from trnlens.lsp.documents import Analysis, ProfiledDocument
from trnlens.lsp.placement import wants_lens
from trnlens.results import Result
from trnlens.settings import LOCAL

KIND = "profile"  # data.kind of an unresolved Profile lens (the compare lenses have their own)

# (uri, qualname) -> "running" / "queued (#2)", or None when no job is pending.
JobState = Callable[[str, str], str | None]
# (document, placed run) -> "−42% vs previous" (history, see lsp/watching.py), or None.
HistoryLabel = Callable[[ProfiledDocument, Result], str | None]


class LensCache:
    """The lenses' JSON form per document, kept while nothing they depend on changes."""

    def __init__(self) -> None:
        self._by_uri: dict[str, tuple[str, tuple, list[dict]]] = {}

    def lenses(
        self,
        doc: ProfiledDocument,
        target: str,
        placement: str,
        pending: frozenset[str],
        ranks: int = 1,
    ) -> list[dict]:
        """``pending``: qualnames with a queued or running job in this document; ``ranks``: the
        target's ``nproc_per_node``."""
        key = self._key(doc, target, placement, pending, ranks)
        cached = self._cached(doc, key)
        if cached is not None:
            return cached
        built = code_lenses(doc, target, placement, pending, ranks)
        self._by_uri[doc.uri] = (doc.text, key, built)
        return built

    async def lenses_off_loop(
        self,
        doc: ProfiledDocument,
        target: str,
        placement: str,
        pending: frozenset[str],
        ranks: int = 1,
    ) -> list[dict]:
        """:meth:`lenses`, built in a worker thread when the cache misses: after each edit of a
        50,000-line file that was 120 ms of CPU on the loop (its 10,000 definitions). The
        document must be parsed (requests wait for it: ``Context.document``)."""
        key = self._key(doc, target, placement, pending, ranks)
        cached = self._cached(doc, key)
        if cached is not None:
            return cached
        text, analysis = doc.text, _profilable(doc)
        placed = frozenset(doc.placements) | frozenset(doc.inputs_failures)
        try:
            built = await asyncio.to_thread(
                _build, doc.uri, analysis, placed, target, placement, pending, ranks
            )
        except (RuntimeError, KeyError):  # an edit moved the anchors meanwhile: ask again
            if doc.text is text:
                raise
            return []
        if doc.text is text:  # else an edit came meanwhile: its own request follows
            self._by_uri[doc.uri] = (text, key, built)
        return built

    @staticmethod
    def _key(doc: ProfiledDocument, *settings: object) -> tuple:
        return (doc.generation, frozenset(doc.placements), frozenset(doc.inputs_failures),
                *settings)  # fmt: skip

    def _cached(self, doc: ProfiledDocument, key: tuple) -> list[dict] | None:
        cached = self._by_uri.get(doc.uri)
        # The text object is replaced on every edit: identity says "same version", for free.
        if cached is not None and cached[0] is doc.text and cached[1] == key:
            return cached[2]
        return None

    def forget(self, uri: str) -> None:
        self._by_uri.pop(uri, None)


def code_lenses(
    doc: ProfiledDocument,
    target: str,
    placement: str,
    pending: frozenset[str] = frozenset(),
    ranks: int = 1,
) -> list[dict]:
    """The document's Profile lenses as LSP JSON (see the module's docstring)."""
    placed = frozenset(doc.placements) | frozenset(doc.inputs_failures)
    return _build(doc.uri, _profilable(doc), placed, target, placement, pending, ranks)


def _profilable(doc: ProfiledDocument) -> Analysis | None:
    """The document's analysis, or None for a library file: it is not the user's to profile
    (lsp/readonly.py)."""
    return None if doc.read_only else doc.analysis()


def _build(
    uri: str,
    analysis: Analysis | None,
    placed: frozenset[str],
    target: str,
    placement: str,
    pending: frozenset[str],
    ranks: int,
) -> list[dict]:
    """:func:`code_lenses` from what it reads of the document (for a worker thread too):
    ``placed``, the qualnames with a placed run or a stopped one."""
    if analysis is None or not analysis.imports_torch:
        return []
    plain = _plain_title(target, ranks)
    lenses = []
    for symbol in analysis.symbols.values():
        qualname = symbol.qualname
        figures = qualname in placed or qualname in pending
        if not figures and not wants_lens(
            qualname, symbol.kind, symbol.suggested, analysis.modules, placement
        ):
            continue
        line = analysis.header_line_now(symbol)
        if line is None:
            continue
        position = {"line": line, "character": symbol.def_column}
        lens: dict[str, Any] = {"range": {"start": position, "end": dict(position)}}
        arguments = {"uri": uri, "qualname": qualname}
        if figures:
            lens["data"] = {**arguments, "kind": KIND, "target": target, "ranks": ranks}
        else:
            if target != LOCAL:
                arguments["target"] = target
            lens["command"] = {"title": plain, "command": PROFILE, "arguments": [arguments]}
        lenses.append(lens)
    return lenses


def resolve(
    doc: ProfiledDocument | None,
    lens: types.CodeLens,
    job_state: JobState,
    history: HistoryLabel | None = None,
) -> types.CodeLens:
    """Fills in the command of a lens from :func:`code_lenses` that carries only ``data``."""
    data = lens.data if isinstance(lens.data, dict) else {}
    uri, qualname = str(data.get("uri", "")), str(data.get("qualname", ""))
    target = str(data.get("target") or LOCAL)
    ranks = data["ranks"] if isinstance(data.get("ranks"), int) else 1
    arguments = {"uri": uri, "qualname": qualname}
    state = job_state(uri, qualname)
    if state is not None:
        command = types.Command(
            title=f"■ {state} · click to cancel", command=CANCEL, arguments=[arguments]
        )
    else:
        if target != LOCAL:
            arguments["target"] = target
        full = _title(doc, qualname, target, history, ranks) if doc else _plain_title(target, ranks)
        title = fit(full)
        tooltip = full if title != full else None
        command = types.Command(
            title=title, command=PROFILE, arguments=[arguments], tooltip=tooltip
        )
        if tooltip is not None and isinstance(lens.data, dict):
            # vscode-languageclient drops a Command's tooltip: its middleware reads it here
            return types.CodeLens(lens.range, command, {**lens.data, "tooltip": tooltip})
    return types.CodeLens(range=lens.range, command=command, data=lens.data)


LENS_CHARS = 80  # a lens sits above code: as wide as an 80-column line, not past the edge
# What goes first when a title is too long (the rest stays in the lens's tooltip).
# " CPU": the host's wall time per step, beside the op time that says more.
# (no " CPU": the lens shows one headline figure, trnlens.headline, which is never left out)
# "peak ": the memory peak (the hover has it, by kind); its growth is never left out.
_DROP_FIRST = ("on ", "MFU ", "peak ", " ago", "just now")


def fit(title: str, limit: int = LENS_CHARS) -> str:
    """``title`` shortened toward ``limit`` characters by leaving out its least telling parts
    (the target, MFU, the age), never the headline time, dispatches, stale, the
    change against the baseline or the compile figures: a title of those alone may stay
    longer."""
    parts = title.split(" · ")
    for marker in _DROP_FIRST:
        if len(" · ".join(parts)) <= limit:
            break
        parts = [
            p
            for i, p in enumerate(parts)
            if i < 2 or not (p.startswith(marker) or p.endswith(marker) or f" {marker}" in p)
        ]
    return " · ".join(parts)


def _plain_title(target: str, ranks: int = 1) -> str:
    title = "▶ Profile" if target == LOCAL else f"▶ Profile on {target}"
    # The target runs nproc_per_node ranks under torchrun: the click does too.
    return f"{title} ({ranks} ranks)" if ranks > 1 else title


def _title(
    doc: ProfiledDocument,
    qualname: str,
    target: str,
    history: HistoryLabel | None = None,
    ranks: int = 1,
) -> str:
    placement = doc.placements.get(qualname)
    multi = placement is not None and rankfigures.is_multi_rank(placement.result.data)
    # a multi-rank run says its ranks once, in its own figures (rankfigures.lens_text)
    title = _plain_title(target, 1 if multi else ranks)
    # the last click stopped for want of inputs: say so where the user clicked, even over an
    # earlier good run's figures (the click did not measure them)
    needs = qualname in doc.inputs_failures
    if needs and not missing_inputs.has_inputs_directive(doc, qualname):
        return f"{title} · failed: needs inputs"
    if placement is None:
        return title
    result = placement.result
    parts = [title]
    if doc.is_stale(placement):
        parts.append("stale")
    if result.error:
        parts.append(format.failure(result.error))
    else:
        ranks_text = rankfigures.lens_text(result.data)  # rank 1 of 2 (slowest, +38%) · ...
        if ranks_text:  # the slowest rank's figures, labelled with its rank
            parts.append(ranks_text)
        parts.append(format.headline(Result(rankfigures.slowest_view(result.data))))
        compile_text = compiled.lens_text(result)  # compile time and graphs of a compiled run
        if compile_text:
            parts.append(compile_text)
        xla_text = xla_figures.lens_text(result)  # 1 graph/step · recompiled 3x (shape, :18)
        if xla_text:
            parts.append(xla_text)
        memory_text = memory.lens_text(result)  # peak 134.8 MB · grows 4.0 KB/step
        if memory_text:
            parts.append(memory_text)
        parts.extend(filter(None, [run_findings.lens_label(result)]))  # Neuron: MFU 31%
        label = history(doc, result) if history is not None else None
        if label:
            parts.append(label)
    parts.append(format.age(result.data["created_at"]))
    if result.data.get("target") not in (None, target):
        parts.append(f"on {result.data['target']}")
    return " · ".join(parts)
