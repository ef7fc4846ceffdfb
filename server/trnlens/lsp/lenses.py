"""Code lenses: ``▶ Profile`` above every function, method and nn.Module class, then its figures.

Shown only in files that import torch. After a run the lens reads the run's headline
(``▶ Profile · 105 ms CPU (ops) · 106 ms CPU · 6 dispatches · 2 min ago``); ``stale`` when the
function's source has changed since; the job's state while it is queued or running (clicking then
cancels it). With history, the change against the baseline follows the figures
(``−42% vs previous``).
"""

from __future__ import annotations

from collections.abc import Callable

from lsprotocol import types

from trnlens.lsp import compiled, format, run_findings
from trnlens.lsp.documents import ProfiledDocument
from trnlens.results import Result
from trnlens.settings import LOCAL

PROFILE = "trnlens.server.profile"
CANCEL = "trnlens.server.cancel"

# (uri, qualname) -> "running: measuring" / "queued (#2)", or None when no job is pending.
JobState = Callable[[str, str], str | None]
# (document, placed run) -> "−42% vs previous" (history, see lsp/watching.py), or None.
HistoryLabel = Callable[[ProfiledDocument, Result], str | None]


def code_lenses(
    doc: ProfiledDocument, target: str, job_state: JobState, history: HistoryLabel | None = None
) -> list[types.CodeLens]:
    analysis = doc.analysis()
    if analysis is None or not analysis.imports_torch:
        return []
    lenses = []
    for symbol in analysis.symbols.values():
        line = analysis.def_line_now(symbol)
        if line is None:
            continue
        position = types.Position(line, symbol.def_column)
        arguments = {"uri": doc.uri, "qualname": symbol.qualname}
        state = job_state(doc.uri, symbol.qualname)
        if state is not None:
            command = types.Command(
                title=f"■ {state} · click to cancel", command=CANCEL, arguments=[arguments]
            )
        else:
            if target != LOCAL:
                arguments["target"] = target
            command = types.Command(
                title=_title(doc, symbol.qualname, target, history),
                command=PROFILE,
                arguments=[arguments],
            )
        lenses.append(types.CodeLens(types.Range(position, position), command))
    return lenses


def _title(
    doc: ProfiledDocument, qualname: str, target: str, history: HistoryLabel | None = None
) -> str:
    title = "▶ Profile" if target == LOCAL else f"▶ Profile on {target}"
    placement = doc.placements.get(qualname)
    if placement is None:
        return title
    result = placement.result
    parts = [title]
    if doc.is_stale(placement):
        parts.append("stale")
    if result.error:
        parts.append(format.failure(result.error))
    else:
        parts.append(format.headline(result))
        compile_text = compiled.lens_text(result)  # compile time and graphs of a compiled run
        if compile_text:
            parts.append(compile_text)
        parts.extend(filter(None, [run_findings.lens_label(result)]))  # Neuron: MFU 31%
        label = history(doc, result) if history is not None else None
        if label:
            parts.append(label)
    parts.append(format.age(result.data["created_at"]))
    if result.data.get("target") not in (None, target):
        parts.append(f"on {result.data['target']}")
    return " · ".join(parts)
