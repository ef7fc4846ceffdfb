"""What a run executed, hashed (agent/executed/fingerprint.py): the same text hashes the same,
an edit in what ran changes the hashes, an edit elsewhere does not."""

from __future__ import annotations

from trnlens.agent.executed import fingerprint

TEXT = """import torch

SCALE = 3.0


def helper(x):
    return x * SCALE


def unused(x):
    return x


class Block(torch.nn.Module):
    size = 4

    def forward(self, x):
        return helper(x)
"""


def test_a_file_s_fingerprint_has_its_module_code_and_the_functions_that_ran():
    found = fingerprint.file_fingerprint(TEXT, [7, 18])
    assert sorted(found["defs"]) == ["Block.forward", "helper"]
    assert found["module"].startswith("sha256:")


def test_an_edit_in_what_ran_changes_the_hashes_and_one_elsewhere_does_not():
    before = fingerprint.file_fingerprint(TEXT, [7, 18])
    unused = fingerprint.file_fingerprint(TEXT.replace("return x\n", "return x + 0\n"), [7, 18])
    assert unused == before
    comment = fingerprint.file_fingerprint(
        TEXT.replace("SCALE = 3.0", "SCALE = 3.0  # ok"), [7, 18]
    )
    assert comment["module"] != before["module"]  # the line's text changed: a real edit
    moved = fingerprint.file_fingerprint("# a comment\n\n" + TEXT, [9, 20])
    assert moved == before  # lines moved, nothing that ran changed
    scale = fingerprint.file_fingerprint(TEXT.replace("3.0", "4.0"), [7, 18])
    assert scale["module"] != before["module"] and scale["defs"] == before["defs"]
    body = fingerprint.file_fingerprint(TEXT.replace("x * SCALE", "x * SCALE * 1"), [7, 18])
    assert body["defs"]["helper"] != before["defs"]["helper"]
    size = fingerprint.file_fingerprint(TEXT.replace("size = 4", "size = 5"), [7, 18])
    assert size["module"] != before["module"]  # a class body ran at import


def test_executed_lines_come_from_the_result():
    result = {
        "function": {"path": "m.py", "line": 17},
        "lines": [{"path": "m.py", "line": 18}],
        "frames": [
            {"path": "h.py", "line": 3, "project": True, "callers": []},
            {"path": "/lib/x.py", "line": 9, "project": False,
             "callers": [{"path": "m.py", "line": 7}]},
        ],
        "modules": [{"caller": {"path": "m.py", "line": 20}}],
    }  # fmt: skip
    assert fingerprint.executed_lines(result) == {"m.py": {7, 17, 18, 20}, "h.py": {3}}
