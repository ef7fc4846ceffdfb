"""Figures follow their lines through incremental and full-text edits."""

from __future__ import annotations

from lsprotocol import types
from trnlens.lsp.anchors import Change, LineAnchors, diff_map, map_line


def _apply(text: str, change: Change, new: str) -> str:
    lines = text.split("\n")
    head = "\n".join(lines[: change.start_line] + [lines[change.start_line][: change.start_char]])
    tail = lines[change.end_line][change.end_char :]
    rest = lines[change.end_line + 1 :]
    return "\n".join([head + new + tail, *rest])


def _check_all(text: str, change: Change, new: str) -> None:
    """Lines the change did not touch must hold the same text where map_line says they went;
    touched lines that survive must keep their head or their tail."""
    after = _apply(text, change, new).split("\n")
    for line, content in enumerate(text.split("\n")):
        now = map_line(line, change)
        if change.start_line <= line <= change.end_line:
            if now is not None:
                head = content[: change.start_char] if line == change.start_line else ""
                tail = content[change.end_char :] if line == change.end_line else ""
                assert after[now].startswith(head) and after[now].endswith(tail)
        else:
            assert now is not None and after[now] == content, (line, now)


TEXT = "\n".join(f"line{i}" for i in range(10))


def _change(sl, sc, el, ec, new):
    return Change(sl, sc, el, ec, new.count("\n")), new


def test_inserting_lines_above_moves_later_lines_down():
    change, new = _change(3, 0, 3, 0, "a\nb\n")
    assert [map_line(i, change) for i in range(5)] == [0, 1, 2, 5, 6]
    _check_all(TEXT, change, new)


def test_newline_typed_at_end_of_a_line_keeps_it_and_moves_the_rest():
    change, new = _change(3, 5, 3, 5, "\n    x = 1")
    assert [map_line(i, change) for i in (2, 3, 4)] == [2, 3, 5]
    _check_all(TEXT, change, new)


def test_deleting_whole_lines_drops_them_and_moves_the_rest_up():
    change, new = _change(2, 0, 4, 0, "")
    assert [map_line(i, change) for i in range(6)] == [0, 1, None, None, 2, 3]
    _check_all(TEXT, change, new)


def test_joining_lines_keeps_the_head_and_drops_the_tail_line():
    change, new = _change(2, 5, 3, 5, "")
    assert [map_line(i, change) for i in (2, 3, 4)] == [2, None, 3]
    _check_all(TEXT, change, new)


def test_editing_inside_a_line_keeps_it():
    change, new = _change(4, 2, 4, 4, "XYZ")
    assert map_line(4, change) == 4 and map_line(5, change) == 5
    _check_all(TEXT, change, new)


def test_from_lsp_and_full_text_changes():
    ranged = types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(1, 0), types.Position(1, 0)), text="x\ny\n"
    )
    assert Change.from_lsp(ranged) == Change(1, 0, 1, 0, 2)
    assert Change.from_lsp(types.TextDocumentContentChangeWholeDocument(text="all")) is None
    old = ["a", "b", "c", "d"]
    assert diff_map(old, ["new", "a", "b", "d"]) == {0: 1, 1: 2, 3: 3}


def test_anchor_sets_follow_a_sequence_of_changes():
    anchors = LineAnchors([3, 5])
    anchors.apply(Change(0, 0, 0, 0, 2))  # two lines inserted at the top
    anchors.apply(Change(5, 0, 6, 0, 0))  # the old line 3 (now 5) deleted
    assert anchors.get(3) is None and anchors.get(5) == 6
    assert dict(anchors.items()) == {5: 6}
    anchors.apply_full({6: 1})
    assert anchors.get(5) == 1
    assert dict(LineAnchors([2], offset=4).items()) == {2: 6}
