"""The attribution pass's tables on hand-made event trees: what real torch here cannot make.

No GPU was at hand: a CUDA copy to the host (an aten::copy_ whose kernel is a device-to-host
memcpy) and a device synchronisation are built by hand, named as what CUDA's profiler records.
"""

from __future__ import annotations

from types import SimpleNamespace

from trnlens.agent.attribution import FrameKinds
from trnlens.agent.breakdown import Breakdown

from tests.agent.test_events import Event, tree

LIB = "/opt/lib/site-packages/somelib/ops.py"


def kinds(torch_module) -> FrameKinds:
    return FrameKinds(lambda f: f.startswith("/proj/"), lambda f: f[len("/proj/") :], torch_module)


def step_with(*work: Event) -> list[Event]:
    label = Event("trnlens.line:0", 1, children=list(work))
    return tree(Event("ProfilerStep#1", 0, children=[label]))


SITES = {"trnlens.line:0": ((LIB, 12, "to_host"), ("/proj/train.py", 30, "step"))}


def _copy(kernel_name: str) -> Event:
    copy = Event("aten::copy_", 4)
    copy.kernels = [SimpleNamespace(name=kernel_name)]
    return Event("aten::to", 2, children=[Event("aten::_to_copy", 3, children=[copy])])


def test_a_copy_to_the_host_is_a_sync_on_a_device_backend_only():
    import torch

    events = step_with(_copy("Memcpy DtoH (Device -> Pageable)"))
    table = Breakdown(events, SITES, {}, kinds(torch), events, lambda e: e.cpu_time_total)
    [sync] = table.host_syncs("cuda")
    assert sync["op"] == "aten::to" and sync["count_per_step"] == 1  # the outermost of the chain
    assert sync["frame"]["path"] == LIB and sync["frame"]["line"] == 12
    assert sync["caller"] == {"path": "train.py", "line": 30}
    # On the CPU backend every tensor is on the host: a copy is no sync.
    assert table.host_syncs("cpu") == []


def test_a_copy_between_devices_is_not_a_host_sync():
    import torch

    events = step_with(_copy("Memcpy HtoD (Pageable -> Device)"))
    table = Breakdown(events, SITES, {}, kinds(torch), events, lambda e: e.cpu_time_total)
    assert table.host_syncs("cuda") == []


def test_a_device_synchronisation_under_user_code_counts_and_trnlens_own_does_not():
    import torch

    user = step_with(Event("cudaDeviceSynchronize", 2))
    ours = tree(Event("ProfilerStep#1", 0, children=[Event("cudaDeviceSynchronize", 2)]))
    events = user + ours[1:]
    table = Breakdown(events, SITES, {}, kinds(torch), events, lambda e: e.cpu_time_total)
    [sync] = table.host_syncs("cuda")
    assert sync["op"] == "cudaDeviceSynchronize" and sync["count_per_step"] == 1
