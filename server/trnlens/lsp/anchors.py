"""Keeping figures on the lines they belong to while the buffer changes.

A run measured lines of one version of the text. The editor then sends incremental changes
(``range`` + replacement text); each change moves every later line by the number of lines it added
or removed, and drops the lines it replaced. :class:`LineAnchors` maps the lines of the measured
version (0-based) to where they are now, change by change, so a figure follows its line and
disappears with it. A full-text change (no range) is mapped by diffing old and new lines.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    """One edit in line terms: ``[start, end]`` (0-based, inclusive, with columns) replaced by
    text containing ``newlines`` line breaks."""

    start_line: int
    start_char: int
    end_line: int
    end_char: int
    newlines: int

    @classmethod
    def from_lsp(cls, change) -> Change | None:
        """From a TextDocumentContentChangeEvent; None for a full-text change (no range)."""
        range_ = getattr(change, "range", None)
        if range_ is None:
            return None
        return cls(
            range_.start.line,
            range_.start.character,
            range_.end.line,
            range_.end.character,
            change.text.count("\n"),
        )


def map_line(line: int, change: Change) -> int | None:
    """Where ``line`` is after ``change``; None when the change replaced it."""
    s, e, k = change.start_line, change.end_line, change.newlines
    if line < s:
        return line
    if line > e:
        return line + k - (e - s)
    # The change touches this line. It survives when its text is kept whole after the change
    # (edit ending at column 0 of it, starting at column 0 or on an earlier line), or when its
    # head is kept before the change (edit starting after column 0).
    if line == e and change.end_char == 0 and (line > s or change.start_char == 0):
        return s + k
    if line == s and change.start_char > 0:
        return s
    if line == s == e:
        return s + k  # an edit at the start of the line: its tail moves down with the new text
    return None


def diff_map(old_lines: list[str], new_lines: list[str]) -> dict[int, int]:
    """Old line -> new line for the lines a diff keeps (a full-text change)."""
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    mapping: dict[int, int] = {}
    for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                mapping[i1 + offset] = j1 + offset
    return mapping


class LineAnchors:
    """Lines of a measured version (0-based keys) -> their line now (None once deleted)."""

    def __init__(self, lines: Iterable[int], offset: int = 0):
        self._now: dict[int, int | None] = {line: line + offset for line in lines}

    def __contains__(self, line: int) -> bool:
        return line in self._now

    def get(self, line: int) -> int | None:
        return self._now.get(line)

    def items(self) -> Iterable[tuple[int, int]]:
        """(measured line, current line) for the lines still present."""
        return ((old, now) for old, now in self._now.items() if now is not None)

    def apply(self, change: Change) -> None:
        for old, now in self._now.items():
            if now is not None:
                self._now[old] = map_line(now, change)

    def apply_full(self, mapping: dict[int, int]) -> None:
        for old, now in self._now.items():
            if now is not None:
                self._now[old] = mapping.get(now)
