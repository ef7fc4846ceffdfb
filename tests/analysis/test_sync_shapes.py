"""The shapes that made TRN101-TRN105 wrong on diffusers and timm (tests/analysis/labels), each
as a snippet: what is no longer reported, what is reported as a sync the code needs, and what is
still reported as a hazard. Each case names the labelled finding it stands for."""

from __future__ import annotations

import pytest

from .helpers import findings

HEADER = "import torch\nimport numpy as np\n\n"


def codes(source: str, select: str = "TRN1") -> list[tuple[str, int, str]]:
    return [
        (f.code, f.location.row - 3, f.extra.get("claim", "hazard"))
        for f in findings(HEADER + source, select=[select])
    ]


# -- TRN105: a device move only to a visible device, of a value the loop cannot change ----------
NOT_A_DEVICE_MOVE = {
    # wan/denoise.py: `.to(block_state.dtype)` is a cast
    "dtype_attribute": "def f(s, ts):\n    for t in ts:\n        g(s.x.to(s.dtype))\n",
    # wan_animate_2/denoise.py: `.to(transformer_dtype)` may be a dtype
    "dtype_name": (
        "def f(x, ts, transformer_dtype):\n    for t in ts:\n        g(x.to(transformer_dtype))\n"
    ),
    # hunyuan_video: `.to(prompt_attention_mask.dtype)`
    "dtype_of_tensor": "def f(x, m, ts):\n    for t in ts:\n        g(x.to(m.dtype))\n",
    # `.to(other)`: may be a tensor to match, or a dtype
    "unknown_target": "def f(x, y, ts):\n    for t in ts:\n        g(x.to(y))\n",
}
CHANGED_IN_THE_LOOP = {
    # modular wan: block_state.latents set in the loop body (attribute store on the base)
    "attribute_store": (
        "def f(s, ts, device):\n    for t in ts:\n        g(s.latents.to(device))\n"
        "        s.latents = h(t)\n"
    ),
    # hunyuan_video: the shape comes from a list the loop appends to (a call on the base)
    "method_call_on_base": (
        "def f(xs, ts, device):\n    for t in ts:\n        xs.append(t)\n"
        "        g(xs[-1].to(device))\n"
    ),
    "passed_to_a_call": (
        "def f(st, ts, device):\n    for t in ts:\n"
        "        step(st, t)\n        g(st.x.to(device))\n"
    ),
}
NOTHING_TO_HOIST = {
    # latte / bria: module buffers and parameters move with the module
    "module_buffer": (
        "class M:\n    def f(self, ts, device):\n"
        "        for t in ts:\n            g(self.buf.to(device))\n"
    ),
    # nvnovograd: a new zero tensor per parameter, stored per parameter
    "fresh_factory": (
        "def f(ps, state):\n    for p in ps:\n        state[p] = torch.zeros([]).to(p.device)\n"
    ),
    # ip_adapter: a model loaded from disk, once
    "loaded_model": (
        "def f(ps, device):\n    for p in ps:\n        m = Model.from_pretrained(p).to(device)\n"
    ),
    # qwenimage_controlnet_inpaint: prepared with device=device before the loop
    "already_on_device": (
        "def f(img, ts, device):\n    img = prepare(img, device=device)\n    for t in ts:\n"
        "        g(img.to(dtype=img.dtype, device=device))\n"
    ),
}


@pytest.mark.parametrize("name", sorted(NOT_A_DEVICE_MOVE | CHANGED_IN_THE_LOOP | NOTHING_TO_HOIST))
def test_not_an_invariant_transfer(name: str) -> None:
    source = (NOT_A_DEVICE_MOVE | CHANGED_IN_THE_LOOP | NOTHING_TO_HOIST)[name]
    assert codes(source, "TRN105") == []


@pytest.mark.parametrize(
    "move",
    [
        "mask.to(device)",
        "mask.to(x.device)",
        "mask.to(x.device, x.dtype)",
        "mask.to(device=d)",
        'mask.to("cuda")',
        'mask.to("cuda:1")',
        "mask.to(torch.device('neuron'))",
        "mask.to(d, non_blocking=True)",
        "mask.cuda()",
        # joyimage: the same VAE statistics built from the config and moved every iteration
        "torch.tensor(cfg.mean).view(1, -1, 1).to(device)",
    ],
)
def test_an_invariant_transfer_is_still_reported(move: str) -> None:
    source = f"def f(mask, cfg, x, d, xs, device):\n    for y in xs:\n        g({move}, y)\n"
    assert codes(source, "TRN105") == [("TRN105", 3, "hazard")]


# -- TRN101 / TRN102: values visibly on the host are no device sync ------------------------------
ON_THE_HOST = {
    # cosmos: `.cpu().item()` (the copy is the `.cpu()`, TRN102, reported once)
    "cpu_then_item": "def f(ts):\n    for t in ts:\n        g(t.cpu().item())\n",
    # consisid: a name that says cpu
    "cpu_name": (
        "def f(timesteps_cpu):\n    for i in range(3):\n        g(timesteps_cpu[i].item())\n"
    ),
    # diffedit, timm scheduler: random numbers drawn on the host
    "factory_without_device": (
        "def f(n):\n    while True:\n        g(torch.randint(n, (1,)).item())\n"
    ),
    # timm drop path: iterating a tensor made with device='cpu'
    "iterate_cpu_tensor": (
        "def f(n):\n    return [x.item() for x in torch.linspace(0, 1, n, device='cpu')]\n"
    ),
    # timm naflex dataset: a CPU generator draws on the host
    "cpu_generator": (
        "def f(p, n):\n    g = torch.Generator()\n    for _ in range(n):\n"
        "        h(torch.multinomial(p, 1, generator=g).item())\n"
    ),
    # lora_conversion_utils: a checkpoint's state dict
    "state_dict": (
        "def f(state_dict, keys):\n    for k in keys:\n        g(state_dict.pop(k).item())\n"
    ),
    # helios schedulers: `self.init_sigmas()` leaves self.sigmas on the CPU
    "host_setter": (
        "class S:\n    def init_sigmas(self):\n        self.sigmas = torch.ones(3).to('cpu')\n\n"
        "    def stages(self, n):\n        self.init_sigmas()\n        for i in range(n):\n"
        "            g(self.sigmas[i].item())\n"
    ),
    # ONNX pipelines: results computed from torch.from_numpy data
    "from_numpy_result": (
        "def f(s, ts, a):\n    for t in ts:\n        out = s.step(torch.from_numpy(a), t)\n"
        "        a = out.prev_sample.numpy()\n"
    ),
    # timm pos_embed_rel: `z = x.cpu()` then `z.numpy()` (reported once, on the .cpu())
    "numpy_of_a_cpu_name": (
        "def f(x, n):\n    for i in range(n):\n        z = x[i].cpu()\n        g(z.numpy())\n"
    ),
}


@pytest.mark.parametrize("name", sorted(ON_THE_HOST))
def test_host_values_are_not_device_syncs(name: str) -> None:
    found = [c for c in codes(ON_THE_HOST[name]) if c[0] in {"TRN101", "TRN102"}]
    if name == "cpu_then_item":
        assert found == [("TRN102", 3, "hazard")]  # the `.cpu()`, once
    elif name == "numpy_of_a_cpu_name":
        assert found == [("TRN102", 3, "hazard")]  # the `.cpu()` on the line before
    else:
        assert found == []


def test_a_chain_copied_once_is_reported_once() -> None:
    # ltx2: `t.detach().cpu().permute(0, 2, 3, 1).numpy()` was reported twice
    source = "def f(xs):\n    for t in xs:\n        g(t.detach().cpu().permute(0, 2, 1).numpy())\n"
    assert codes(source) == [("TRN102", 3, "hazard")]


def test_a_comprehension_copying_each_element_is_not_reported() -> None:
    # training_utils: {k: v.detach().cpu() for k, v in sd.items()} is a checkpoint, not a hazard
    source = "def f(sd):\n    return {k: v.detach().cpu() for k, v in sd.items()}\n"
    assert codes(source) == []


def test_the_iterable_of_an_inner_loop_runs_once_per_outer_iteration() -> None:
    # wan_animate_2: `for u, v in zip(x, grid.tolist())` evaluates the tolist() once
    assert codes("def f(x, grid):\n    for u, v in zip(x, grid.tolist()):\n        g(u, v)\n") == []
    nested = (
        "def f(xs, grid):\n    for x in xs:\n        for u in grid[x].tolist():\n            g(u)\n"
    )
    assert codes(nested) == [("TRN102", 3, "hazard")]  # once per outer iteration


# -- TRN101: a sync whose value the host needs ----------------------------------------------------
NEEDED = {
    "if_test": "def f(m, n):\n    for i in range(n):\n        if m[i].item():\n            g(i)\n",
    "break": (
        "def f(xs):\n    for x in xs:\n        if int(x.argmax().item()) == 2:\n            break\n"
    ),
    "slice_bound": "def f(e, a, n):\n    for i in range(n):\n        g(e[i, : a[i].item()])\n",
    "name_then_if": (
        "def f(xs):\n    for x in xs:\n        done = x.any().item()\n        if not done:\n"
        "            continue\n"
    ),
    "reshape_size": (
        "def f(ps, c):\n    for i in range(3):\n        h = (c[i].max() + 1).item()\n"
        "        g(ps[i].reshape(h, -1))\n"
    ),
}


@pytest.mark.parametrize("name", sorted(NEEDED))
def test_a_sync_the_code_needs_is_a_hint(name: str) -> None:
    (finding,) = findings(HEADER + NEEDED[name], select=["TRN101"])
    assert finding.extra["claim"] == "needed" and finding.severity == "hint"
    assert "a sync the code needs" in finding.message


def test_a_fill_value_is_not_a_size() -> None:
    # ernie_image: `torch.full((n,), t.item(), device=d)`: t.expand(n) would stay on the device
    source = "def f(ts, n, d):\n    for t in ts:\n        g(torch.full((n,), t.item(), device=d))\n"
    (finding,) = findings(HEADER + source, select=["TRN101"])
    assert "claim" not in finding.extra and finding.severity == "info"
    assert "accumulate on the device" in finding.message


# -- TRN104: only a copy to a visible device ------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        "torch.tensor([t])",  # controlnet_inpaint: no device, a host tensor
        "torch.from_numpy(a)",  # ONNX pipelines, timm collate: wraps host memory
        "torch.tensor(1.0, device='cpu')",  # timm adopt
    ],
)
def test_a_host_tensor_is_no_transfer(make: str) -> None:
    assert codes(f"def f(ts, a):\n    for t in ts:\n        g({make})\n", "TRN104") == []


@pytest.mark.parametrize(
    "make",
    [
        "torch.tensor([t], device=d)",
        "torch.as_tensor(t, device=x.device)",
        "torch.from_numpy(a[t]).to(device)",
        "torch.tensor(a).view(1, -1).to(x.device, x.dtype)",
    ],
)
def test_a_tensor_made_on_the_device_is_reported(make: str) -> None:
    source = f"def f(ts, a, d, x, device):\n    for t in ts:\n        g({make})\n"
    assert [c[0] for c in codes(source, "TRN104")] == ["TRN104"]


def test_work_guarded_to_run_once_is_not_per_iteration() -> None:
    # hunyuan_image: `if i == len(timesteps) - 1: timestep_r = torch.tensor([0.0], device=device)`
    source = (
        "def f(ts, d):\n    for i, t in enumerate(ts):\n        if i == len(ts) - 1:\n"
        "            r = torch.tensor([0.0], device=d)\n"
    )
    assert codes(source, "TRN104") == []


# -- severity and the measured note ----------------------------------------------------------------
def test_severity_follows_the_proof() -> None:
    rms = (
        "def f(x):\n    v = x.pow(2).mean(-1, keepdim=True)\n    return x * torch.rsqrt(v + 1e-6)\n"
    )
    (fused,) = findings(HEADER + rms)
    assert fused.fix is not None and fused.severity == "warning"
    (sync,) = findings(HEADER + "def f(xs):\n    for x in xs:\n        g(x.sum().item())\n")
    assert sync.severity == "info"
    for f in (fused, sync):
        assert f.message.endswith("(static: not measured)")


def test_a_fused_pattern_without_a_fix_is_information() -> None:
    # attention whose weights are used elsewhere: flagged, no fix (SDPA does not return them)
    source = (
        "def f(q, k, v):\n    s = q @ k.transpose(-2, -1) / 8.0\n    p = torch.softmax(s, dim=-1)\n"
        "    return p @ v, p\n"
    )
    (finding,) = findings(HEADER + source, select=["TRN006"])
    assert finding.fix is None and finding.severity == "info"
