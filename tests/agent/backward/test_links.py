"""The profiler's sequence numbers link each backward node to the forward op that made it
(backward/links.py), and the module map names a node's or a parameter's module (modulemap.py):
real torch on the CPU."""

from __future__ import annotations

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile
from trnlens.agent.backward.links import BackwardLinks, node_name, node_of
from trnlens.agent.backward.modulemap import NodeModules, parameter_modules


def _profiled(fn):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = fn()
    return out, list(prof.events())


def test_the_node_is_made_by_the_last_op_that_saw_its_number_and_grad_accumulation_has_none():
    w = torch.randn(4, 4, requires_grad=True)
    x = torch.randn(4, 4)

    def step():
        y = x.unsqueeze(0).squeeze(0)  # no input requires grad: no node, the same number seen
        loss = (y @ w).sin().sum()
        loss.backward()
        return loss

    _, events = _profiled(step)
    links = BackwardLinks(events)
    made = {}
    for event in events:
        node, forward = links.forward_of(event)
        if node is not None and event.name.startswith("aten::"):
            made[node_name(node)] = forward.name if forward is not None else None
    assert made["MmBackward0"] == "aten::mm"  # not the squeeze that saw the same number first
    assert made["SinBackward0"] == "aten::sin"
    assert made["torch::autograd::AccumulateGrad"] is None  # the engine's own: no forward op
    forward_mm = next(e for e in events if e.name == "aten::mm" and node_of(e) is None)
    assert not links.is_backward(forward_mm) and links.forward_of(forward_mm) == (None, None)


def test_a_parameter_belongs_to_the_module_that_registers_it_tied_weights_to_the_first():
    embed = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=True)
    head.weight = embed.weight  # tied, as language models do
    model = nn.Sequential(embed, head)
    owners = parameter_modules(model.named_modules(prefix="model"))
    assert owners[id(embed.weight)] == "model.0"
    assert owners[id(head.bias)] == "model.1"


def test_a_live_node_maps_to_the_module_whose_forward_made_it():
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
    labels: dict[int, str] = {}  # id(forward op event) -> module, by the test's own spans

    def run():
        out = x = torch.randn(7, 3)
        for index, layer in enumerate(model):
            with torch.autograd.profiler.record_function(f"layer:{index}"):
                out = layer(out if index else x)
        return out

    out, events = _profiled(run)
    for event in events:
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("layer:"):
            parent = parent.cpu_parent
        if parent is not None:
            labels[id(event)] = f"model.{parent.name.split(':')[1]}"
    owners = parameter_modules(model.named_modules(prefix="model"))
    modules = NodeModules(BackwardLinks(events), lambda e: labels.get(id(e)), owners)
    assert modules.of_node(out.grad_fn) == "model.2"  # AddmmBackward0 of the last Linear
    inputs = {type(n).__name__: n for n, _ in out.grad_fn.next_functions if n is not None}
    tanh = inputs["TanhBackward0"]
    assert modules.of_node(tanh) == "model.1"
    # AddmmBackward0's bias input: an AccumulateGrad, named by its parameter's module.
    assert inputs["AccumulateGrad"].variable is model[2].bias
    assert modules.of_node(inputs["AccumulateGrad"]) == "model.2"
    assert modules.of_node(tanh.next_functions[0][0]) == "model.0"


def test_a_custom_function_and_a_compiled_regions_backward_link_to_their_apply():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    layer = nn.Linear(8, 8)
    compiled = torch.compile(lambda x: torch.relu(layer(x)).sin(), backend="aot_eager")
    x = torch.randn(4, 8)
    w = torch.randn(8, requires_grad=True)

    def step():
        (Square.apply(w + 1).sum() + compiled(x).sum()).backward()

    step()  # compiles
    _, events = _profiled(step)
    links = BackwardLinks(events)
    made = {}
    for event in events:
        node, forward = links.forward_of(event)
        if node is not None:
            made[node_name(node)] = forward.name if forward is not None else None
    # The node is made when apply starts (its event carries the number), before the forward's
    # own ops (which see the next one).
    assert made["SquareBackward"] == "Square"
    assert made["CompiledFunctionBackward"] == "CompiledFunction"
