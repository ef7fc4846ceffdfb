"""TRN301-TRN303: what cuts an XLA graph, seen statically in code that uses torch-xla."""

from __future__ import annotations

import textwrap

from tests.analysis.helpers import findings

XLA_CODE = textwrap.dedent(
    """
    import torch
    import torch_xla


    def step(x, mask):
        y = x * 2
        idx = torch.nonzero(y > 0)
        picked = y.masked_select(mask)
        kept = torch.where(y > 0, y, 0)
        rows = torch.where(mask)
        scale = y.max().item()
        if y.sum() > 0:
            y = y + 1
        if y.max().item() > 1:
            y = y / 2
        if x.shape[0] > 2:
            y = y * 2
        host = y.cpu()
        arr = y.cpu().numpy()
        return y * scale, idx, picked, kept, rows, host
    """
)


def _codes(source: str) -> list[tuple[int, str]]:
    return [(f.location.row, f.code) for f in findings(source) if f.code.startswith("TRN3")]


def _row(needle: str) -> int:
    return next(i for i, line in enumerate(XLA_CODE.splitlines(), 1) if needle in line)


def test_each_graph_cut_is_found_at_its_line():
    assert _codes(XLA_CODE) == [
        (_row("torch.nonzero"), "TRN301"),
        (_row("masked_select"), "TRN301"),
        (_row("torch.where(mask)"), "TRN301"),
        (_row(".item()"), "TRN302"),
        (_row("if y.sum()"), "TRN303"),
        (_row("if y.max().item()"), "TRN302"),  # one finding: the read, not the branch too
        (_row("host = y.cpu()"), "TRN302"),
        (_row("y.cpu().numpy()"), "TRN302"),  # one finding: the .cpu()
    ]


def test_findings_are_hints_that_say_what_xla_does():
    found = {f.code: f for f in findings(XLA_CODE) if f.code.startswith("TRN3")}
    assert all(f.severity == "info" for f in found.values())
    assert "forced execution" in found["TRN302"].message


def test_code_that_does_not_use_torch_xla_gets_none():
    plain = XLA_CODE.replace("import torch_xla\n", "")
    assert _codes(plain) == []
