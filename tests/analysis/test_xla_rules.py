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


def _row(needle: str, source: str = XLA_CODE) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if needle in line)


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


TRACKED = textwrap.dedent(
    """
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm


    def broadcast(t, ids_cpu, scheduler):
        n = xm.all_reduce("max", t)
        early = n.cpu()
        n = n.cpu()
        value = n.item()
        picked = torch.masked_select(ids_cpu, ids_cpu > 0)
        lr = scheduler.get_last_lr()[0].item()
        torch_xla.sync()
        after = t.sum().item()
        return early, value, picked, lr, after


    def decode(x, steps):
        for _ in range(steps):
            x = x * 2
            torch_xla.sync()
            if x.sum().item() == 0:
                break
            x = x + 1
            if x.max().item() > 9:
                break
        return x


    def train(loss):
        def log_closure():
            print(loss.item())

        xm.add_step_closure(log_closure)


    def check(t, mask):
        if torch.any(t < 0):
            raise ValueError("negative")
        if torch.all(mask == 1):
            t = t + 1
        return t
    """
)


def _tracked(needle: str) -> int:
    return next(i for i, line in enumerate(TRACKED.splitlines(), 1) if needle in line)


def test_host_values_reads_after_a_sync_and_step_closures_are_not_findings():
    """The three shapes of the false findings on optimum-neuron 0.4.5 (docs/rules.md)."""
    found = _codes(TRACKED)
    assert (_tracked("early = n.cpu()"), "TRN302") in found  # lazy: read before any sync
    assert (_tracked("n = n.cpu()"), "TRN302") in found
    assert (_tracked("value = n.item()"), "TRN302") not in found  # n is a host copy by then
    assert not any(row == _tracked("masked_select(ids_cpu") for row, _ in found)  # host tensor
    assert not any(row == _tracked("get_last_lr") for row, _ in found)  # the scheduler's lr
    assert not any(row == _tracked("after = t.sum()") for row, _ in found)  # after the sync
    assert not any(row == _tracked("print(loss.item())") for row, _ in found)  # step closure
    # in a loop, the sync just before the read: not a cut; an op between them: a cut again...
    assert not any(row == _tracked("if x.sum().item() == 0") for row, _ in found)
    assert (_tracked("if x.max().item() > 9"), "TRN302") in found
    # ...and a check that only raises is no step's branch; one that changes the graph is
    assert not any(row == _tracked("if torch.any(t < 0)") for row, _ in found)
    assert (_tracked("if torch.all(mask == 1)"), "TRN303") in found


def test_a_read_in_a_loop_with_the_sync_after_it_is_still_a_cut():
    source = textwrap.dedent(
        """
        import torch_xla


        def loop(x, steps):
            for _ in range(steps):
                x = x * 2
                if x.sum().item() == 0:
                    break
                torch_xla.sync()
            return x
        """
    )
    assert any(code == "TRN302" for _, code in _codes(source))


PREPARED = textwrap.dedent(
    """
    import torch
    import torch_xla.core.xla_model as xm


    def get_batches(iterator, n, device):
        batches = [next(iterator) for _ in range(n)]
        total = sum([(b["labels"] != -100).sum() for b in batches])
        count = total.item()
        for i, batch in enumerate(batches):
            batches[i] = {k: v.to(device) for k, v in batch.items()}
        late = batches[0]["labels"].sum().item()
        return batches, count, late


    def train(loader, model, device):
        for batch in loader:
            if batch["x"].sum().item() > 0:
                pass
            batch = batch["x"].to(device)
            loss = model(batch)
    """
)


def test_data_read_before_the_function_moves_it_to_the_device_is_a_host_read():
    """Data preparation (issue 40): the batches are host tensors until this function's own
    ``.to(device)``; after it, and in a loop whose later iterations see the moved value, reads
    stay findings."""
    rows = [row for row, code in _codes(PREPARED) if code == "TRN302"]
    line = {n: i for i, n in enumerate(PREPARED.splitlines(), 1)}
    at = {needle: next(i for text, i in line.items() if needle in text)
          for needle in ("count = total.item()", "late = ", 'if batch["x"]')}  # fmt: skip
    assert at["count = total.item()"] not in rows
    assert at["late = "] in rows
    assert at['if batch["x"]'] in rows


def test_a_dtype_conversion_is_no_move_to_the_device():
    source = PREPARED.replace("v.to(device)", "v.to(torch.long)")
    assert any("count = total.item()" in source.splitlines()[row - 1] for row, _ in _codes(source))


TRACED_ONLY = textwrap.dedent(
    """
    import torch
    import torch_neuronx
    from optimum.neuron.utils import DiffusersPretrainedConfig


    def step(ref, out):
        if not torch.allclose(ref, out):
            out = out * 0
        return out.max().item()
    """
)


def test_code_around_an_ahead_of_time_traced_model_is_host_code():
    """``torch_neuronx.trace``'d models take host tensors: a module that imports torch_neuronx or
    optimum-neuron's inference side, and not torch-xla, reads CPU tensors (issue 40)."""
    assert _codes(TRACED_ONLY) == []
    for lazy in ("import torch_xla", "from torch_neuronx.xla_impl import ops",
                 "from optimum.neuron import NeuronTrainer",
                 "from optimum.neuron.accelerate import NeuronAccelerator"):  # fmt: skip
        source = TRACED_ONLY.replace("import torch_neuronx", lazy)
        assert [code for _, code in _codes(source)] == ["TRN303", "TRN302"], lazy


def test_the_branch_message_says_what_happens_traced_and_lazy():
    found = {f.code: f for f in findings(XLA_CODE) if f.code.startswith("TRN3")}
    assert "each time" in found["TRN303"].message and "baked" in found["TRN303"].message


LOOPS = textwrap.dedent(
    """
    import torch
    import torch_xla.core.xla_model as xm


    def train(model, loader, optimizer, log_every):
        for step, batch in enumerate(loader):
            loss = model(batch)
            loss.backward()
            optimizer.step()
            if step % log_every == 0:
                print(loss.item())
                kept = torch.nonzero(loss > 0)
            seen = loss.item()


    def evaluate(model, loader):
        return [model(batch).mean().item() for batch in loader]


    def greedy_search(model, ids):
        while True:
            ids = model(ids).argmax(-1)
            if (ids == 0).all():
                return ids
    """
)


def test_reads_logged_every_n_steps_evaluation_and_generation_are_not_the_steps_cost():
    """Issue 40, point 5: the blind reading disputed reads in generation loops (a stop flag per
    token) as no training step's cost; a read under ``if step % N == 0`` already is "less often"."""
    found = _codes(LOOPS)
    assert (_row("seen = loss.item()", LOOPS), "TRN302") in found  # every step: still a cut
    assert (_row("print(loss.item())", LOOPS), "TRN302") not in found
    # a data-dependent shape under the same `if` still makes its own graph every N steps
    assert (_row("torch.nonzero", LOOPS), "TRN301") in found
    assert not any(r >= _row("def evaluate", LOOPS) for r, _ in found), found
