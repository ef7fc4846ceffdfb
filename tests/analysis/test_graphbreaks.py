"""TRN201-TRN204: graph-break causes seen statically in torch.compile'd functions (hints)."""

from __future__ import annotations

import textwrap

from tests.analysis.helpers import findings

COMPILED = textwrap.dedent(
    """
    import logging
    import numpy as np
    import torch

    log = logging.getLogger(__name__)


    @torch.compile
    def step(x):
        y = x.sin()
        print("step", y.shape)
        log.info("logged")
        if y.sum() > 0:
            y = y + 1
        if x.shape[0] > 2 and x.dim() == 2:
            y = y * 2
        scale = y.max().item()
        rows = y.tolist()
        offsets = np.arange(4)
        return y * scale if y.mean() > 0 else y
    """
)


def _codes(source: str) -> list[tuple[int, str]]:
    return [(f.location.row, f.code) for f in findings(source) if f.code.startswith("TRN2")]


def _row(source: str, needle: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if needle in line)


def test_each_cause_is_a_hint_at_its_line():
    found = _codes(COMPILED)
    assert found == [
        (_row(COMPILED, "print("), "TRN201"),
        (_row(COMPILED, "log.info"), "TRN201"),
        (_row(COMPILED, "if y.sum()"), "TRN203"),
        (_row(COMPILED, ".item()"), "TRN202"),
        (_row(COMPILED, ".tolist()"), "TRN202"),
        (_row(COMPILED, "np.arange"), "TRN204"),
        (_row(COMPILED, "y.mean() > 0"), "TRN203"),
    ]
    assert {f.severity for f in findings(COMPILED) if f.code.startswith("TRN2")} == {"info"}


def test_branch_is_reported_on_its_condition():
    [branch] = [f for f in findings(COMPILED, "TRN203") if f.location.row == _row(COMPILED, "if y")]
    assert (branch.location.column, branch.end_location.column) == (8, 19)  # `y.sum() > 0`
    assert "data-dependent" in branch.message and "torch.cond" in branch.message


def test_shape_tests_and_uncompiled_functions_are_not_flagged():
    source = textwrap.dedent(
        """
        import torch


        def eager(x):
            print(x.sum())
            if x.sum() > 0:
                return x.item()
            return x


        @torch.compile(mode="reduce-overhead")
        def by_shape(x):
            if x.shape[-1] > 4 or x.ndim == 3 or x is None or isinstance(x, list):
                return x * 2
            return x
        """
    )
    assert _codes(source) == []


def test_options_form_of_the_decorator_counts():
    source = textwrap.dedent(
        """
        import torch


        @torch.compile(fullgraph=False)
        def f(x):
            print("x")
            return x
        """
    )
    assert _codes(source) == [(_row(source, "print("), "TRN201")]
