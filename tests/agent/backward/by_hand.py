"""Backward counted by hand with plain torch.profiler, for the tests and the GPU check
(bench/gpu_backward_check.py): nothing of trnlens is imported here.

torch's own Python tracer names each module call (``nn.Module: LlamaRMSNorm_0``,
``with_stack=True``: no trnlens hook); each backward node is followed to the forward op that took
its sequence number, and that op to its innermost module event.
"""

from __future__ import annotations

from collections import Counter

TRAIN = """
import torch
from transformers import LlamaConfig, LlamaForCausalLM

DEVICE = "cpu"  # bench/gpu_backward_check.py runs it on "cuda"


def build():
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, vocab_size=100,
                         max_position_embeddings=64)
    model = LlamaForCausalLM(config).to(DEVICE)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    return model, opt, torch.randint(0, 100, (1, 16), device=DEVICE)


# trnlens: inputs=build
def step(model, opt, ids):
    out = model(ids, labels=ids)
    out.loss.backward()
    opt.step()
    opt.zero_grad()
    return out.loss
"""

ENGINE = "autograd::engine::evaluate_function: "


def _ancestors(event):
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def backward_by_hand(model, opt, ids):
    """{(module class, index in first-call order): backward dispatches per step}, the number of
    engine-run dispatches in the step, and the unlinked ones, from plain torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    def step():
        out = model(ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad()

    step()  # AdamW's state is made on its first step: not in the measured one
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        step()
    events = list(prof.events())
    made: dict = {}  # (thread, sequence number) -> the last forward op that started with it
    for event in sorted(events, key=lambda e: e.time_range.start):
        inside = event.name.startswith(ENGINE) or any(
            a.name.startswith(ENGINE) for a in _ancestors(event)
        )
        if event.sequence_nr >= 0 and not inside:
            made[(event.thread, event.sequence_nr)] = event
    counts: Counter = Counter()
    engine_run = unlinked = 0
    for event in events:
        if not event.name.startswith("aten::"):
            continue
        if any(a.name.startswith("aten::") for a in _ancestors(event)):
            continue  # not a dispatch: another aten op called it
        node = next((a for a in _ancestors(event) if a.name.startswith(ENGINE)), None)
        if node is None:
            continue
        engine_run += 1
        forward = made.get((node.fwd_thread, node.sequence_nr))
        module = None
        if forward is not None:
            module = next(
                (a.name for a in _ancestors(forward) if a.name.startswith("nn.Module: ")), None
            )
        if module is None:
            unlinked += 1
            continue
        cls, _, index = module[len("nn.Module: ") :].rpartition("_")
        counts[(cls, int(index))] += 1
    return counts, engine_run, unlinked
