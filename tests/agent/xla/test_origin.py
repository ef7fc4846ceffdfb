"""agent/xla/origin.py: the line that made a view, from the line that used it."""

from __future__ import annotations

from trnlens.agent.xla.origin import view_origin

SOURCE = """\
def step(x, n):
    x = x[:, :n]
    h = x.view(4, -1)
    y = x * 2
    z = h + 1
    w = y.sum()
    return w
"""


def test_a_slice_assigned_before_its_use_is_the_origin():
    assert view_origin(SOURCE, 4) == (2, "x = x[:, :n]")


def test_a_view_method_is_an_origin_and_the_nearest_assignment_wins():
    assert view_origin(SOURCE, 5) == (3, "h = x.view(4, -1)")


def test_no_view_among_the_names_read_and_bad_input_give_none():
    assert view_origin(SOURCE, 6) is None  # y is x * 2: no view made there
    assert view_origin(SOURCE, 99) is None
    assert view_origin("def broken(:\n", 1) is None
