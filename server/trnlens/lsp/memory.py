"""A run's memory in the editor (agent/memorypass.py; figures and words: memoryfigures.py).

- Growth is said loudly: a Warning at each line whose allocations a step still holds after it
  (bytes a step), a Hint once the run is stale. Memory that grows step over step ends a long
  fine-tuning job however fast its steps are, so its size does not lower the level.
- A hint at the end of a growth line says the bytes a step (``memory +4.0 KB/step``), within
  VS Code's default hint length with the line's other hints (hints.fitted), ahead of them.
- The function's hover gives the peak, its phase and line, and what is live then by kind.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from lsprotocol import types

from trnlens import memoryfigures, memoryfixes, rankfigures, units
from trnlens.lsp import format, markdown
from trnlens.lsp.documents import ProfiledDocument
from trnlens.lsp.hints import STALE, Labelled, utf16_length
from trnlens.lsp.run_findings import SOURCE, line_range
from trnlens.results import Result
from trnlens.settings import Settings

CODE = "memory-growth"


class Growing(NamedTuple):
    """A growth row of a run placed on this document, at its current 0-based line."""

    line: int
    row: memoryfigures.Growth
    memory: memoryfigures.Memory
    result: Result
    stale: bool


def growing_here(doc: ProfiledDocument) -> Iterator[Growing]:
    for placement in doc.placements.values():
        result = placement.result
        memory = memoryfigures.read(result.data) if not result.error else None
        if memory is None:
            continue
        stale = doc.is_stale(placement)
        for row in memory.growth:
            if row.path != doc.relpath or row.line is None:
                continue
            line = placement.now(row.line - 1)
            if line is not None:
                yield Growing(line, row, memory, result, stale)


def diagnostics(doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
    found = []
    warning, hint = types.DiagnosticSeverity.Warning, types.DiagnosticSeverity.Hint
    for line, row, memory, result, stale in growing_here(doc):
        measured = (
            f"measured: {memory.steps} steps on {memory.device} ({result.qualname}, "
            f"{format.age(result.data['created_at'])})"
        )
        if stale:
            measured += " · stale: the function or its inputs changed since"
        found.append(
            types.Diagnostic(
                range=line_range(doc.text, line),
                message=(
                    f"{memoryfigures.growth_words(row.bytes_per_step, memory.steps)}. "
                    f"{memoryfigures.GROWTH_ADVICE}\n{measured}"
                ),
                severity=hint if stale else warning,
                source=SOURCE,
                code=CODE,
            )
        )
    return found


def labelled(doc: ProfiledDocument, range_: types.Range) -> list[Labelled]:
    """A hint at each growth line in ``range_``: its bytes a step."""
    lines = doc.text.splitlines()
    found = []
    for line, row, memory, result, stale in growing_here(doc):
        if line >= len(lines) or not range_.start.line <= line <= range_.end.line:
            continue
        marker = STALE if stale else ""
        size = units.data_size(row.bytes_per_step)
        hint = types.InlayHint(
            position=types.Position(line, utf16_length(lines[line])),
            label="",
            padding_left=True,
            tooltip=f"{memoryfigures.growth_words(row.bytes_per_step, memory.steps)}{marker}"
            f"\n\n{memoryfigures.GROWTH_ADVICE}\n\n{result.qualname}, run {result.run_id}",
        )
        labels = [f"memory +{size}/step{marker}", f"+{size}/step{marker}"]
        found.append(Labelled(hint, labels, priority=3))  # growth must be seen
    return found


def lens_text(result: Result) -> str | None:
    """The lens's memory figures: ``peak 134.8 MB``, and ``grows 4.0 KB/step`` when it grows
    (the peak is left out of a title too long, the growth never: lenses.fit)."""
    memory = memoryfigures.read(result.data)
    if memory is None:
        return None
    peak = f"peak {units.data_size(memory.peak_bytes)}"
    growth = memory.growth_per_step_bytes
    ranked = rankfigures.peak_label(result.data)
    if ranked is not None:  # several ranks: the one nearest its limit, named (r1 peak ...)
        peak = f"r{ranked[0]} peak {units.data_size(ranked[1])}"
        growth = max(
            [r.get("memory_growth_per_step_bytes") or 0 for r in result.data["ranks"]] + [growth]
        )
    if growth > 0:
        return f"{peak} · grows {units.data_size(growth)}/step"
    return peak


def hover_lines(result: Result) -> list[str]:
    """The function hover's memory part (none without a memory pass)."""
    memory = memoryfigures.read(result.data)
    if memory is None:
        return []
    rank = f"(rank {memory.rank}) " if memory.rank is not None else ""
    lines = ["", f"**memory** {rank}{markdown.text(memoryfigures.peak_words(memory))}"]
    if memory.at_peak:
        lines.append(f"live then: {markdown.text(memoryfigures.parts_words(memory))}")
    made_at = memoryfigures.made_by_words(memory.at_peak_by_line, limit=3)
    if made_at:
        lines.append(f"made at: {markdown.text(made_at)}")
    if memory.activations_by_module:
        words = markdown.text(memoryfigures.keepers_words(memory, limit=3))
        lines.append(f"activations kept for backward: {words}")
    candidate = memoryfixes.checkpoint_candidate(result.data)
    if candidate is not None:
        words = markdown.text(memoryfixes.candidate_words(candidate))
        command = memoryfixes.measure_command(result.path, result.qualname)
        library = memoryfixes.library_words(candidate)
        lines.append(
            f"memory for time: {words}; measure it: `{command}` or the lightbulb's Measure "
            "checkpointing" + (f"; {library}" if library else "")
        )
    ranks = rankfigures.nearest_limit_words(result.data)
    if ranks:
        lines.append(f"ranks: {markdown.text(ranks)}")
    if memory.grows:
        lines.append(
            f"**grows {markdown.text(units.data_size(memory.growth_per_step_bytes))} a step** "
            "(see the line's warning)"
        )
    return lines
