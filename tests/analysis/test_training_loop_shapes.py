"""The shapes that made TRN101-TRN106 wrong, or silent, on training and serving loops (torchtune
0.6.1, accelerate 1.10.1 and diffusers: tests/analysis/labels), each as a snippet naming the
labelled finding it stands for; and the fused-op forms issue 26 added (an RMSNorm over a dim held
in an attribute, a hand-written form whose docstring says why)."""

from __future__ import annotations

import pytest
from trnlens.analysis import analyse_source

from .helpers import findings

HEADER = "import torch\nimport numpy as np\n\n"


def found(source: str, select: str = "TRN1") -> list[tuple[str, int, str, str]]:
    return [
        (f.code, f.location.row - 3, f.extra.get("claim", "hazard"), f.severity)
        for f in findings(HEADER + source, select=[select])
    ]


def messages(source: str, code: str) -> list[str]:
    return [f.message for f in findings(HEADER + source, code)]


# -- a comprehension's outer iterable is evaluated once --------------------------------------------
def test_the_outer_iterable_of_a_comprehension_runs_once() -> None:
    # the same code as a `for` loop was already left alone (test_sync.py)
    source = "def f(t):\n    return [g(v) for v in t.cpu()]\n"
    assert found(source) == []
    assert found("def f(t):\n    return [v for v in t.tolist() if v]\n") == []


def test_inside_an_outer_loop_the_comprehension_head_counts_once_per_iteration() -> None:
    # accelerate test_script.py: `[torch.tensor(i) for i in data.tolist()]` inside a loop
    source = (
        "def f(batches):\n    for data in batches:\n        xs = [h(i) for i in data.tolist()]\n"
    )
    assert found(source) == [("TRN102", 3, "hazard", "info")]


def test_a_loop_over_a_literal_list_of_a_few_values_is_not_per_step() -> None:
    # accelerate test_script.py: `for data in [even_data, odd_data]:` runs twice in all
    source = "def f(a, b):\n    for data in [a, b]:\n        xs = data.tolist()\n"
    assert found(source) == []


# -- code under `if step % n == 0` runs every N steps ----------------------------------------------
PERIODIC = (
    "def train(model, loader, log_every, logger):\n"
    "    for step, batch in enumerate(loader):\n"
    "        loss = model(batch)\n"
    "        if step % log_every == 0 and logger is not None:\n"
    "            logger.log_dict({'loss': loss.detach().cpu()})\n"
    "        if not step % 100:\n"
    "            print_it(loss.item())\n"
)


def test_a_sync_every_n_steps_is_a_hint_that_says_so() -> None:
    # torchtune full_dpo_distributed.py:1001, the metrics dict under `% log_every_n_steps`
    assert found(PERIODIC) == [
        ("TRN102", 5, "periodic", "hint"),
        ("TRN101", 7, "periodic", "hint"),
    ]
    (copy,) = messages(PERIODIC, "TRN102")
    assert "every N iterations (under `if step % log_every == 0 and logger is not None:`)" in copy
    assert "not every iteration" in copy


# -- per-step logging reads ------------------------------------------------------------------------
LOGGING = (
    "def train(model, loader, pbar, writer):\n"
    "    for step, batch in enumerate(loader):\n"
    "        loss = model(batch)\n"
    "        loss_to_log = loss.item()\n"
    "        pbar.set_description(f'loss {loss_to_log}')\n"
    "        writer.add_scalar('lr', sched.lr.item(), step)\n"
    "        shown = model.aux(batch).item()\n"
    "        pbar.set_postfix(loss=shown)\n"
)


def test_a_logging_read_gets_the_advice_that_fits() -> None:
    # torchtune full_finetune_single_device.py:720, `loss_to_log = running_loss.item()`
    got = messages(LOGGING, "TRN101")
    assert len(got) == 3
    for message in got:
        assert "for logging or a progress bar" in message
        assert "only on the steps that log it" in message and "non_blocking=True" in message
        assert "after the loop" not in message


def test_a_logging_read_already_every_n_steps_is_not_told_to_read_every_n_steps() -> None:
    guarded_read = "        if step % 10 == 0:\n            loss_to_log = loss.item()\n"
    source = LOGGING.replace("        loss_to_log = loss.item()\n", guarded_read)
    (guarded, *_) = messages(source, "TRN101")
    assert "every N iterations (under `if step % 10 == 0:`)" in guarded
    assert "only on the steps that log it" not in guarded and "non_blocking=True" in guarded


def test_a_value_read_twice_is_told_to_read_once() -> None:
    # torchtune generate_v2.py:203: `append(token.item())` and `if token.item() in stop: break`
    source = (
        "def gen(model, token, stop, n):\n"
        "    out = []\n"
        "    for _ in range(n):\n"
        "        if token.item() in stop:\n"
        "            break\n"
        "        token = model(token)\n"
        "        out.append(token.item())\n"
    )
    assert found(source) == [("TRN101", 4, "needed", "hint"), ("TRN101", 7, "hazard", "info")]
    assert "read it once and reuse" in messages(source, "TRN101")[1]


# -- checkpoints, offloads and modules -------------------------------------------------------------
@pytest.mark.parametrize(
    "source",
    [
        # torchtune _distributed.py:381 (gather_cpu_state_dict)
        "def gather_cpu_state_dict(model):\n    out = {}\n"
        "    for k, p in model.state_dict().items():\n        out[k] = p.full_tensor().cpu()\n",
        # torchtune _distributed.py:312 (a loop over a state dict, any function name)
        "def load(model, full_sd):\n    for name, t in full_sd.items():\n"
        "        t = shard(t)\n        keep(t.cpu())\n",
        "def backup(model):\n    for n, p in model.named_parameters():\n        keep(n, p.cpu())\n",
        # diffusers pipeline_utils.py:1498: a module moved (the result is not kept)
        "def offload(components):\n    for component in components:\n        component.to('cpu')\n",
        # diffusers semantic_stable_diffusion.py:657, a comment says it is an offload
        "def f(xs, w):\n    for x in xs:\n        w = w.to('cpu')  # Offload to cpu\n"
        "        w = g(w.to(x.device), x)\n",
    ],
    ids=["checkpoint_function", "state_dict_loop", "named_parameters", "module_move", "offload"],
)
def test_checkpoint_and_offload_copies_are_not_reported(source: str) -> None:
    assert found(source) == []


# -- `.to("cpu")` spellings are device-to-host copies ----------------------------------------------
@pytest.mark.parametrize(
    "copy",
    [
        'x.to("cpu")',
        "x.to(torch.device('cpu'))",
        'x.to(device="cpu")',
        'x.to("cpu", torch.float32)',
    ],
)
def test_to_cpu_is_a_host_copy(copy: str) -> None:
    source = f"def f(xs):\n    for x in xs:\n        keep({copy})\n"
    assert found(source) == [("TRN102", 3, "hazard", "info")]
    (message,) = messages(source, "TRN102")
    assert message.startswith("`.to(")


def test_a_non_blocking_copy_and_a_chain_are_not_reported_twice() -> None:
    source = (
        "def f(xs):\n    for x in xs:\n        keep(x.to('cpu', non_blocking=True))\n"
        "        keep(x.to('cpu').numpy())\n"
    )
    assert found(source) == [("TRN102", 4, "hazard", "info")]


# -- host provenance through sort / argsort / indexing ---------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        "order = torch.argsort(scores.cpu())",
        "order = scores.cpu().argsort(descending=True)",
        "order = torch.sort(scores.cpu()).indices",
        "order = scores.cpu().sort().values",
        "order = scores.cpu()[keep].flip(0)",
    ],
)
def test_sorting_or_indexing_a_host_tensor_keeps_it_on_the_host(make: str) -> None:
    source = (
        f"def f(scores, keep):\n    {make}\n    for i in range(3):\n        use(order[i].item())\n"
    )
    assert found(source) == []


def test_sorting_a_device_tensor_is_still_a_sync() -> None:
    source = (
        "def f(scores):\n    order = torch.argsort(scores)\n"
        "    for i in range(3):\n        use(order[i].item())\n"
    )
    assert [c for c, *_ in found(source)] == ["TRN101"]


# -- TRN104: one tensor on each device in turn -----------------------------------------------------
def test_a_tensor_made_on_each_device_in_turn_is_not_repeated_work() -> None:
    # accelerate modeling.py:773, `torch.tensor(0, device=torch.device("npu", i))` per device
    source = (
        "def init(n):\n    for i in range(n):\n"
        "        _ = torch.tensor(0, device=torch.device('npu', i))\n"
        "        _ = torch.tensor([0], device=i)\n"
    )
    assert found(source) == []
    # the device of a value changes with the value, not the device itself: still reported
    same_device = (
        "def f(model, xs, t):\n    for x in xs:\n        y = model(x)\n"
        "        s = torch.tensor([t], device=y.device)\n"
    )
    assert [c for c, *_ in found(same_device)] == ["TRN104"]


# -- TRN106: implicit bool syncs -------------------------------------------------------------------
IMPLICIT = {
    # torchtune _generation.py:387
    "if_all_break": (
        "def gen(model, tokens, n, stop):\n"
        "    done = torch.zeros(4, dtype=torch.bool, device=tokens.device)\n"
        "    for _ in range(n):\n"
        "        done = done | (model(tokens) == stop)\n"
        "        if done.all():\n"
        "            break\n"
    ),
    "while_any": "def f(model, m):\n    while m.any():\n        m = model(m)\n",
    "bool_call": (
        "def f(model, xs):\n    for x in xs:\n"
        "        if bool(torch.isnan(model(x)).any()):\n            raise ValueError\n"
    ),
    "if_name": (
        "def f(model, xs):\n    for x in xs:\n"
        "        bad = model(x).isnan().any()\n        if bad:\n            return x\n"
    ),
    "not_and": (
        "def f(model, xs, on):\n    for x in xs:\n"
        "        if on and not (model(x) == 0).all():\n            return x\n"
    ),
}
IMPLICIT_ROWS = {"if_all_break": 5, "while_any": 2, "bool_call": 3, "if_name": 4, "not_and": 3}


@pytest.mark.parametrize("name", sorted(IMPLICIT))
def test_an_implicit_bool_sync_in_a_loop_is_a_needed_sync(name: str) -> None:
    assert found(IMPLICIT[name]) == [("TRN106", IMPLICIT_ROWS[name], "needed", "hint")]
    (message,) = messages(IMPLICIT[name], "TRN106")
    assert "implicit sync" in message and "every iteration" in message


NOT_IMPLICIT = {
    # diffusers image_processor.py:313, `mask = np.array(image)`: NumPy, no device
    "numpy_array": (
        "def f(image):\n    mask = np.array(image)\n    for i in range(8):\n"
        "        if not (mask[:, i] == 0).all():\n            break\n"
    ),
    # diffusers skyreels: `pre_row = torch.zeros(n)` (no device) then reassigned from itself
    "host_factory": (
        "def f(n):\n    row = torch.zeros(n, dtype=torch.long)\n"
        "    while not torch.all(row >= 3):\n        row = row + 1\n"
    ),
    "after_the_loop": (
        "def f(model, xs):\n    for x in xs:\n        y = model(x)\n    if y.any():\n        pass\n"
    ),
    "python_builtin_all": "def f(xs):\n    for x in xs:\n        if all(x):\n            pass\n",
    "shape_test": "def f(xs):\n    for x in xs:\n        if x.shape[0]:\n            pass\n",
    "is_tensor": "def f(xs):\n    for x in xs:\n        if torch.is_tensor(x):\n            pass\n",
}


@pytest.mark.parametrize("name", sorted(NOT_IMPLICIT))
def test_truth_tests_that_are_no_device_sync(name: str) -> None:
    assert found(NOT_IMPLICIT[name]) == []


def test_an_implicit_sync_under_a_periodic_guard_says_every_n() -> None:
    source = (
        "def f(model, xs):\n    for i, x in enumerate(xs):\n        y = model(x)\n"
        "        if i % 10 == 0 and y.isnan().any():\n            raise ValueError\n"
    )
    (message,) = messages(source, "TRN106")
    assert "every N iterations (under `if i % 10 == 0 and y.isnan().any():`)" in message


# -- TRN001 over a dim held in an attribute: flagged, no fix ---------------------------------------
def test_rmsnorm_over_a_dim_in_an_attribute_is_flagged_without_a_fix() -> None:
    # diffusers autoencoder_kl_ltx2.py:59, `torch.mean(x**2, dim=self.channel_dim, keepdim=True)`
    source = (
        "class Norm(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        mean_sq = torch.mean(x**2, dim=self.channel_dim, keepdim=True)\n"
        "        return x / torch.sqrt(mean_sq + self.eps)\n"
    )
    (finding,) = findings(HEADER + source, "TRN001")
    assert finding.fix is None and finding.severity == "info"
    assert "`self.channel_dim`" in finding.message and "no fix offered" in finding.message


def test_rmsnorm_over_another_literal_dim_is_not_flagged() -> None:
    source = "def f(x):\n    return x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6)\n"
    assert findings(HEADER + source, "TRN001") == []


# -- a hand-written form whose docstring or comment says why ---------------------------------------
LAYERNORM_BODY = (
    "    def forward(self, x):\n"
    "        mu = x.mean(-1, keepdim=True)\n"
    "        var = ((x - mu) ** 2).mean(-1, keepdim=True)\n"
    "        return (x - mu) / torch.sqrt(var + 1e-5)\n"
)


def test_a_stated_reason_keeps_the_finding_and_drops_the_fix() -> None:
    source = (
        "class LN(torch.nn.Module):\n"
        '    """Written out: torch\'s fused layer_norm gives wrong gradients under forward-mode\n'
        '    AD."""\n\n' + LAYERNORM_BODY
    )
    (finding,) = findings(HEADER + source, "TRN002")
    assert finding.fix is None and finding.severity == "info"
    assert "the code says why it is written out" in finding.message
    assert "forward-mode" in finding.message


@pytest.mark.parametrize(
    "source",
    [
        "def rms(x):\n    # not torch.rms_norm: the exporter does not support it\n"
        "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n",
        "class N:\n    # written out because rms_norm is not supported by the exporter\n"
        "    def rms(self, x):\n"
        "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n",
        # Above a top-level def: the comment lines go with the def's chunk (source.py).
        "x = 1\n\n\n# not torch.rms_norm: the exporter does not support it\n@staticmethod\n"
        "def rms(x):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n",
        # Above a method past the first of a class long enough to be cut into its members.
        "class N:\n"
        + "".join(f"    def m{i}(self):\n        return {i}\n\n" for i in range(20))
        + "    # written out because rms_norm is not supported by the exporter\n"
        "    def rms(self, x):\n"
        "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n",
    ],
    ids=[
        "comment_in_the_function",
        "comment_above_the_method",
        "comment_above_a_top_level_function",
        "comment_above_a_method_of_a_long_class",
    ],
)
def test_a_comment_is_a_reason_too(source: str) -> None:
    (finding,) = findings(HEADER + source, "TRN001")
    assert finding.fix is None and "exporter" in finding.message


def test_a_comment_above_with_a_blank_line_between_is_no_reason() -> None:
    source = (
        "x = 1\n\n# not torch.rms_norm: the exporter does not support it\n\n"
        "def rms(x):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
    )
    (finding,) = findings(HEADER + source, "TRN001")
    assert finding.fix is not None


@pytest.mark.parametrize(
    "doc",
    [
        "LayerNorm module in the TF style (epsilon inside the square root).",  # deberta: no reason
        "Avoids a copy because the input is contiguous.",  # a reason, but not about the fused op
    ],
)
def test_a_docstring_without_a_reason_about_the_fused_op_keeps_the_fix(doc: str) -> None:
    source = f'class LN(torch.nn.Module):\n    """{doc}"""\n\n' + LAYERNORM_BODY
    (finding,) = findings(HEADER + source, "TRN002")
    assert finding.fix is not None and finding.severity == "warning"


# -- settled with the blind second reader (docs/rules.md) ------------------------------------------
def test_a_function_traced_for_export_is_not_a_runtime_sync() -> None:
    # torchtune _export/_position_embeddings.py:197: `.item()` next to torch._check is a SymInt
    source = (
        "def forward(self, x, aspect_ratio):\n"
        "    torch._check(x.shape[1] <= self.max_num_tiles)\n"
        "    for i, (h, w) in enumerate(aspect_ratio):\n"
        "        h = h.item()\n"
        "        x[i, : h * 2] += 1\n"
    )
    assert found(source) == []
    assert found(source.replace("torch._check", "check")) == [("TRN101", 4, "needed", "hint")]


def test_a_value_read_twice_without_a_branch_is_told_to_read_once() -> None:
    # accelerate megatron_lm.py:1172/1176: `math.exp(v.item())`, then `add_scalar(.., v.item())`
    source = (
        "def log_eval_results(self, writer):\n"
        "    for key in self.losses:\n"
        "        value = self.losses[key] / self.counts[key]\n"
        "        ppl = math.exp(min(20, value.item()))\n"
        "        writer.add_scalar(key, value.item(), self.iteration)\n"
    )
    got = messages(source, "TRN101")
    assert len(got) == 2
    assert all("two syncs where one would do" in m and "read it once" in m for m in got)


@pytest.mark.parametrize(
    "path",
    ["tests/test_loop.py", "pkg/test_utils/scripts/run.py", "pkg/loop_test.py", "conftest.py"],
)
def test_the_sync_rules_say_nothing_in_test_code(path: str) -> None:
    # accelerate test_utils/scripts/test_script.py:809: a per-row copy in a two-row test
    source = HEADER + "def f(results):\n    for r in results:\n        keep(r.to('cpu'))\n"
    assert findings(source) and [f.code for f in findings(source)] == ["TRN102"]
    assert analyse_source(source, path) == []
    naive = HEADER + "def f(x):\n    return x * torch.sigmoid(x)\n"
    assert [f.code for f in analyse_source(naive, path)] == ["TRN005"]  # fused-op rules still apply
