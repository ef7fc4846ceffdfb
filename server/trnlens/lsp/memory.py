"""A run's memory in the editor (agent/memorypass.py; figures and words: memoryfigures.py).

- Growth is said loudly: a Warning at each line whose allocations a step still holds after it
  (bytes a step), a Hint once the run is stale. Memory that grows step over step ends a long
  fine-tuning job however fast its steps are, so its size does not lower the level.
- The function's hover gives the peak, its phase and line, and what is live then by kind.
"""

from __future__ import annotations

from lsprotocol import types

from trnlens import memoryfigures, units
from trnlens.lsp import format, markdown
from trnlens.lsp.documents import ProfiledDocument
from trnlens.lsp.run_findings import SOURCE, line_range
from trnlens.results import Result
from trnlens.settings import Settings

CODE = "memory-growth"


def diagnostics(doc: ProfiledDocument, settings: Settings) -> list[types.Diagnostic]:
    found = []
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
            if line is None:
                continue
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
                    severity=(
                        types.DiagnosticSeverity.Hint if stale else types.DiagnosticSeverity.Warning
                    ),
                    source=SOURCE,
                    code=CODE,
                )
            )
    return found


def hover_lines(result: Result) -> list[str]:
    """The function hover's memory part (none without a memory pass)."""
    memory = memoryfigures.read(result.data)
    if memory is None:
        return []
    lines = ["", f"**memory** {markdown.text(memoryfigures.peak_words(memory))}"]
    if memory.at_peak:
        lines.append(f"live then: {markdown.text(memoryfigures.parts_words(memory))}")
    if memory.grows:
        lines.append(
            f"**grows {markdown.text(units.data_size(memory.growth_per_step_bytes))} a step** "
            "(see the line's warning)"
        )
    return lines
