"""The memory part of a profile's text output (agent/memorypass.py; words: memoryfigures.py)."""

from __future__ import annotations

from collections.abc import Callable

from trnlens import memoryfigures, memoryfixes, units
from trnlens.speedup import variant_label

Table = Callable[[list[str], list[list[str]], set[int]], list[str]]


def memory_lines(data: dict) -> list[str]:
    """The peak, what is live at it by kind, and any growth, loudly (empty without a memory
    pass)."""
    memory = memoryfigures.read(data)
    if memory is None:
        return []
    whose = f"rank {memory.rank}, " if memory.rank is not None else ""
    out = [
        "",
        f"Memory ({whose}{memory.device}, {memory.basis}, {memory.steps} steps)",
        f"  {memoryfigures.peak_words(memory)}",
    ]
    if memory.at_peak:
        out.append(f"    live then: {memoryfigures.parts_words(memory)}")
    for label, rows in (
        ("by line", memory.at_peak_by_line),
        ("by library line", memory.at_peak_by_library_line),
        ("by module", memory.at_peak_by_module),
    ):
        said = memoryfigures.made_by_words(rows)
        if said:
            out.append(f"    {label}: {said}")
    if memory.activations_by_module:
        out.append(
            "  activations kept for backward, by module (one step): "
            + memoryfigures.keepers_words(memory)
        )
    out.extend(_checkpoint_lines(data))
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


def _checkpoint_lines(data: dict) -> list[str]:
    """The fix that trades time for memory, estimated, with the command that measures it."""
    candidate = memoryfixes.checkpoint_candidate(data)
    function = data.get("function") or {}
    if candidate is None or not function.get("path") or not function.get("qualname"):
        return []
    command = memoryfixes.measure_command(function["path"], function["qualname"])
    library = memoryfixes.library_words(candidate)
    return [
        f"  memory for time: {memoryfixes.candidate_words(candidate)}",
        f"    measure it: {command}",
    ] + ([f"    {library}"] if library else [])


def comparison_memory_lines(data: dict, table: Table) -> list[str]:
    """Each variant's peak against the baseline's and its growth (empty when no variant has a
    memory pass): a fix measured in bytes as well as time."""
    variants = data["variants"]
    baseline = data.get("baseline", 0)
    read = [memoryfigures.read(v) for v in variants]
    base = read[baseline] if 0 <= baseline < len(read) else None
    if not any(read):
        return []
    rows = []
    for i, (v, memory) in enumerate(zip(variants, read, strict=True)):
        label = variant_label(v) + (" (baseline)" if i == baseline else "")
        if memory is None:
            rows.append([label, "-", "", "", "not measured"])
            continue
        versus = "-"
        if i != baseline and base is not None and base.peak_bytes:
            versus = f"{100 * (memory.peak_bytes / base.peak_bytes - 1):+.1f}%"
        growth = "none"
        if memory.grows:
            top = memory.growth[0] if memory.growth else None
            at = f" at {top.path}:{top.line}" if top is not None and top.path else ""
            growth = f"{units.data_size(memory.growth_per_step_bytes)} a step{at}"
        rows.append([label, units.data_size(memory.peak_bytes), versus,
                     memory.peak_phase or "-", growth])  # fmt: skip
    shown = next(m for m in read if m is not None)
    out = ["", f"Memory per variant ({shown.device}, {shown.basis})"]
    out.extend(table(["Variant", "Peak", "vs baseline", "Peak in", "Growth"], rows, {1, 2}))
    return out
