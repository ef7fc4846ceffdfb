"""The memory part of a profile's text output (agent/memorypass.py; words: memoryfigures.py)."""

from __future__ import annotations

from trnlens import memoryfigures


def memory_lines(data: dict) -> list[str]:
    """The peak, what is live at it by kind, and any growth, loudly (empty without a memory
    pass)."""
    memory = memoryfigures.read(data)
    if memory is None:
        return []
    out = [
        "",
        f"Memory ({memory.device}, {memory.basis}, {memory.steps} steps)",
        f"  {memoryfigures.peak_words(memory)}",
    ]
    if memory.at_peak:
        out.append(f"    live then: {memoryfigures.parts_words(memory)}")
    if not memory.grows:
        out.append("  no growth: nothing a step allocates is held after it")
        return out
    for row in memory.growth:
        where = f"{row.path}:{row.line}" if row.path else "outside the project's code"
        out.append(
            f"  GROWTH at {where}: " + memoryfigures.growth_words(row.bytes_per_step, memory.steps)
        )
    out.append(f"    {memoryfigures.GROWTH_ADVICE}")
    return out
