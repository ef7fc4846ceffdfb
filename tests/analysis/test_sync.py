"""TRN101-TRN105: host-device syncs and transfers in loops, and what is not one."""

from __future__ import annotations

import pytest

from .helpers import findings

HEADER = "import torch\n\n"

TRAIN = HEADER + (
    "def train(model, loader, opt, device, mask):\n"
    "    total = 0.0\n"
    "    for step, (x, y) in enumerate(loader):\n"
    "        x = x.to(device)\n"  # the loop's own data: fine
    "        m = mask.to(device)\n"  # TRN105: never changes
    "        w = torch.tensor([1.0, 2.0], device=device)\n"  # TRN104 (invariant)
    "        t = torch.tensor(y, device=device)\n"  # TRN104 (per-step data)
    "        loss = model(x, m, w, t).sum()\n"
    "        total += loss.item()\n"  # TRN101
    "        preds = model(x).argmax(-1).cpu().numpy()\n"  # TRN102 once, on .cpu()
    "        print(f'step {step}: {loss}')\n"  # TRN103
    "        y.tolist()\n"  # TRN102
    "    return total\n"
)


def test_training_loop_hazards() -> None:
    got = [(f.code, f.location.row) for f in findings(TRAIN)]
    assert got == [
        ("TRN105", 7),
        ("TRN104", 8),
        ("TRN104", 9),
        ("TRN101", 11),
        ("TRN102", 12),
        ("TRN103", 13),
        ("TRN102", 14),
    ]
    by_code = {f.code: f for f in findings(TRAIN)}
    assert "every iteration" in by_code["TRN101"].message
    assert by_code["TRN101"].fix is None and by_code["TRN101"].qualname == "train"


def test_invariant_and_per_step_tensor_creation_are_told_apart() -> None:
    messages = [f.message for f in findings(TRAIN, "TRN104")]
    assert "create it once before the loop" in messages[0]
    assert "keep the data on the device" in messages[1]


NOT_IN_LOOP = {
    "item_after_loop": (
        "def f(xs):\n    s = torch.zeros(())\n    for x in xs:\n        s += x\n"
        "    return s.item()\n"
    ),
    "cast_not_transfer": "def f(xs):\n    for x in xs:\n        y = xs[0].to(torch.float32)\n",
    "print_string": "def f(xs):\n    for x in xs:\n        print('step', len(xs))\n",
    "loop_iterable_runs_once": "def f(t):\n    for v in t.tolist():\n        pass\n",
    "nested_def_not_in_loop": (
        "def f(xs):\n    for x in xs:\n        pass\n    def g(t):\n        return t.item()\n"
    ),
    "model_to_device": "def f(model, xs, d):\n    for x in xs:\n        model.to(d)\n",
}


@pytest.mark.parametrize("name", sorted(NOT_IN_LOOP))
def test_not_flagged(name: str) -> None:
    assert findings(HEADER + NOT_IN_LOOP[name], select=["TRN1"]) == []


def test_comprehensions_and_while_loops_and_module_level_scripts() -> None:
    source = HEADER + (
        "def f(ts):\n"
        "    vals = [t.item() for t in ts]\n"
        "    i = 0\n"
        "    while i < 3:\n"
        "        y = ts[i].cpu()\n"
        "        i += 1\n"
        "for t in range(3):\n"
        "    print(torch.randn(2).sum())\n"
    )
    got = [(f.code, f.location.row, f.qualname) for f in findings(source)]
    assert got == [("TRN101", 4, "f"), ("TRN102", 7, "f"), ("TRN103", 10, None)]


def test_noqa_and_select_apply_to_sync_rules() -> None:
    source = HEADER + "def f(ts):\n    for t in ts:\n        t.item()  # noqa: TRN101\n"
    assert findings(source) == []
    assert (
        findings(HEADER + "def f(ts):\n    for t in ts:\n        t.item()\n", ignore=["TRN1"]) == []
    )


def test_modules_without_torch_are_not_checked_for_syncs() -> None:
    source = "import tensorflow as tf\n\ndef f(ts):\n    for t in ts:\n        t.numpy()\n"
    assert findings(source) == []
