"""Which files are outside the project (lsp/readonly.py), and the inputs quick fix's choices
(lsp/missing_inputs.py): a fitting factory reused, integer ids for ids, masks and labels."""

from __future__ import annotations

import sysconfig
from pathlib import Path

from trnlens.lsp import missing_inputs, readonly
from trnlens.lsp.documents import ProfiledDocument


def test_installed_and_standard_library_files_are_outside_the_project(tmp_path):
    root = tmp_path / "project"
    assert not readonly.outside_project(root / "model.py", root, [root])
    for path in (
        tmp_path / "venv/lib/python3.11/site-packages/transformers/modeling.py",
        root / ".venv/lib/python3.11/site-packages/torch/nn/linear.py",  # even inside the root
        Path("/usr/lib/python3/dist-packages/numpy/core.py"),
        Path("/opt/py/lib/python3.12/json/decoder.py"),
        Path(sysconfig.get_paths()["stdlib"]) / "functools.py",
        tmp_path / "elsewhere" / "notes.py",  # outside every workspace folder
    ):
        assert readonly.outside_project(path, root, [root]), path
    # no workspace folder named: only the library rules apply
    assert not readonly.outside_project(tmp_path / "elsewhere" / "notes.py", tmp_path, [])


def _doc(text: str) -> ProfiledDocument:
    return ProfiledDocument("file:///p/m.py", Path("/p/m.py"), Path("/p"), text, generation=1)


def test_a_fitting_factory_is_reused_an_unrelated_helper_is_not():
    text = """import torch


def build_model():
    return torch.nn.Linear(4, 4)


def ids():
    return torch.randint(0, 100, (1, 16))


def pair():
    return torch.randn(2), torch.randn(2)


def logits(input_ids):
    return input_ids


def add(a, b):
    return a + b


def scale(x):
    return x
"""
    doc = _doc(text)
    assert missing_inputs.existing_factory(doc, "logits") == "ids"
    assert missing_inputs.existing_factory(doc, "add") == "pair"  # two values for two
    assert missing_inputs.existing_factory(doc, "scale") is None  # build_model: no inputs
    edit = missing_inputs.quick_fix_edit(doc, "logits")
    [only] = edit.changes[doc.uri]
    assert only.new_text == "# trnlens: inputs=ids\n"


def test_a_new_factory_builds_integer_ids_and_masks():
    doc = _doc(
        "import torch\n\n\ndef forward(input_ids, attention_mask, labels, hidden):\n    pass\n"
    )
    text = missing_inputs.factory_text(doc, "forward", "forward_inputs")
    assert (
        "return (torch.randint(0, 100, (2, 16)), torch.ones(2, 16, dtype=torch.long), "
        "torch.randint(0, 100, (2, 16)), torch.randn(8, 64))" in text
    ), text


def test_the_generated_swap_helper_gets_no_profile_lens():
    from trnlens.libraries import swap
    from trnlens.lsp.documents import analyse

    entry = {
        "code": "TRN001", "owner": "LlamaRMSNorm", "library": {"name": "transformers"},
        "fix": {"type_path": "transformers.models.llama.modeling_llama.LlamaRMSNorm",
                "method": "forward", "message": "fused",
                "source": "def forward(self, x):\n    return torch.rms_norm(x, (4,), None)\n"},
    }  # fmt: skip
    imports, helper = swap.helper(entry, {"torch"}, True)
    text = f"import torch\n{imports}\n\n{helper}\n\ndef mine(x):\n    return torch.relu(x)\n"
    symbols = analyse(text).symbols
    assert not symbols["_fused_llama_rms_norm_forward"].suggested
    assert symbols["mine"].suggested


def test_a_late_cancel_is_not_logged():
    import logging

    from trnlens.lsp.server import _LateCancels

    record = logging.LogRecord(
        "pygls",
        logging.WARNING,
        "",
        0,
        'Cancel notification for unknown message id "%s"',
        ("7",),
        None,
    )
    other = logging.LogRecord("pygls", logging.WARNING, "", 0, "something else", (), None)
    assert not _LateCancels().filter(record) and _LateCancels().filter(other)
