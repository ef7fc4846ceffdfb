"""Source text: decoding, positions, and parsing that survives broken files.

``ast`` reports columns as UTF-8 byte offsets; findings use character columns. ``SourceText``
converts between them and between (row, column) and string offsets. ``parse_blocks`` parses a whole
module, and when that fails parses each top-level block on its own, so one syntax error does not
hide every other finding in the file.
"""

from __future__ import annotations

import ast
import codecs
import io
import re
import tokenize
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate

from trnlens.analysis.model import Location


class SourceText:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)

    @cached_property
    def _starts(self) -> list[int]:
        """Where each line starts, and one past the last line (for end positions at EOF):
        computed when a position is first asked for, which most chunks never are."""
        return list(accumulate(map(len, self.lines), initial=0))

    def line(self, row: int) -> str:
        return self.lines[row - 1] if 0 < row <= len(self.lines) else ""

    def char_col(self, row: int, byte_col: int) -> int:
        """0-based character column of an ``ast`` byte offset on a 1-based row."""
        line = self.line(row)
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def node_start(self, node: ast.AST) -> Location:
        row = node.lineno  # type: ignore[attr-defined]
        return Location(row, self.char_col(row, node.col_offset) + 1)  # type: ignore[attr-defined]

    def node_end(self, node: ast.AST) -> Location:
        row = node.end_lineno  # type: ignore[attr-defined]
        return Location(row, self.char_col(row, node.end_col_offset) + 1)  # type: ignore[attr-defined]

    def offset(self, loc: Location) -> int:
        row = min(max(loc.row, 1), len(self._starts))
        return self._starts[row - 1] + loc.column - 1

    def segment(self, node: ast.AST) -> str:
        return self.text[self.offset(self.node_start(node)) : self.offset(self.node_end(node))]

    def indent_of(self, row: int) -> str:
        line = self.line(row)
        return line[: len(line) - len(line.lstrip(" \t"))]


@dataclass
class DecodedSource:
    text: str
    # Set when the bytes were not valid in their declared encoding: the text holds replacement
    # characters, so fixes must never be written back to such a file.
    decode_error: str | None = None
    encoding: str = "utf-8"
    bom: bool = False  # re-added when a fixed file is written back


def decode(data: bytes) -> DecodedSource:
    """Decode Python source bytes (BOM and PEP 263 cookie honoured), never raising."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        encoding = "utf-8" if encoding == "utf-8-sig" else encoding
    except SyntaxError:  # an unknown encoding in the cookie
        encoding = "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        text = data.decode(encoding, errors="replace")
        row = data[: exc.start].count(b"\n") + 1
        bad = data[exc.start : exc.start + 1].hex()
        error = f"invalid {encoding} byte 0x{bad} on line {row}"
        return DecodedSource(text.removeprefix("\ufeff"), error, encoding)
    bom = text.startswith("\ufeff")
    return DecodedSource(text.removeprefix("\ufeff"), None, encoding, bom)


@dataclass
class ParseError:
    message: str
    row: int
    column: int  # 1-based


def parse(text: str) -> list[ast.stmt] | ParseError:
    """The module's statements, or why Python's parser refused it (never raises)."""
    try:
        return ast.parse(text).body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return describe(exc)


def describe(exc: BaseException) -> ParseError:
    if isinstance(exc, SyntaxError):
        return ParseError(f"syntax error: {exc.msg}", exc.lineno or 1, max(exc.offset or 1, 1))
    if isinstance(exc, RecursionError | MemoryError):
        return ParseError("source too deeply nested or too large for Python's parser", 1, 1)
    return ParseError(f"cannot parse: {exc}", 1, 1)


# A line at column 0 that may start a top-level statement: not blank, not a comment, not a closing
# bracket, not a clause continuing the previous statement.
_STATEMENT = re.compile(r"[^\s#)\]}]")
_CONTINUATION = re.compile(r"(else|elif|except|finally)\b")


def statement_starts(lines: list[str]) -> list[int]:
    """0-based lines where a top-level statement may start, from indentation alone.

    Decorators stay with what they decorate, and so do the comment lines at column 0 just above
    a statement (or its decorators), after the first: a comment there may say why the function
    is written as it is (rules/stated.py reads it with the function). A line at column 0 inside
    a multi-line string or bracket is a false start: the text before it then fails to parse on
    its own, which the caller (``engine``) detects and repairs by merging chunks.
    """
    starts: list[int] = []
    previous_decorator = False
    for i, line in enumerate(lines):
        if not _STATEMENT.match(line) or _CONTINUATION.match(line):
            continue
        if not previous_decorator:
            if starts:
                floor = starts[-1] + 1
                while i > floor and lines[i - 1].startswith("#"):
                    i -= 1
            starts.append(i)
        previous_decorator = line.startswith("@")
    return starts
