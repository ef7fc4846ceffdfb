"""One rank's calls from hand-made profiler events: each launch owns the next work event of its
backend, the labels around it give its line and owner, and the exposed part is what the caller's
own ops did not cover."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from trnlens.agent.collectives import calls


@dataclass
class Range:
    start: float
    end: float

    def elapsed_us(self) -> float:
        return self.end - self.start


@dataclass
class Event:
    name: str
    start: float
    end: float
    thread: int = 1
    cpu_parent: Event | None = None
    device_type: str = "DeviceType.CPU"
    time_range: Range = field(init=False)

    def __post_init__(self):
        self.time_range = Range(self.start, self.end)


def is_host(event) -> bool:
    return event.device_type.endswith("CPU")


DDP = [{"model": "ddp", "buckets": [
    {"index": 0, "bytes": 400, "params": 2, "modules": ["ddp.module.2"]},
    {"index": 1, "bytes": 800, "params": 2, "modules": ["ddp.module.0"]},
]}]  # fmt: skip


def ddp_step() -> list[Event]:
    """One step: forward (0-10), backward (10-100) launching 2 buckets, gloo's work on its threads;
    the caller's compute during backward ends at 40, then it waits for the buckets."""
    step = Event("ProfilerStep#3", 0, 100)
    forward = Event("aten::linear", 1, 10, cpu_parent=step)
    backward = Event("trnlens.collective:issuer:backward@train.py:21", 10, 99, cpu_parent=step)
    grad = "autograd::engine::evaluate_function: AddmmBackward0"
    grad0 = Event(grad, 11, 20, cpu_parent=backward)
    launch0 = Event("c10d::allreduce_", 21, 22, cpu_parent=backward)
    grad1 = Event(grad, 23, 40, cpu_parent=backward)
    launch1 = Event("c10d::allreduce_", 41, 42, cpu_parent=backward)
    work0 = Event("gloo:all_reduce", 25, 60, thread=7)
    work1 = Event("gloo:all_reduce", 43, 130, thread=8)  # its event closed late: past the step
    return [step, forward, backward, grad0, launch0, grad1, launch1, work0, work1]


def test_ddp_buckets_get_their_work_the_backward_line_and_their_modules():
    got = calls.timeline(ddp_step(), 1_000_000, is_host, ddp=DDP)
    assert got["trace_start_unix_us"] == 1000.0 and got["steps"] == [[0, 100]]
    first, second = got["collectives"]
    assert (first["name"], first["path"], first["line"], first["source"]) == (
        "all_reduce", "train.py", 21, "ddp",
    )  # fmt: skip
    assert (first["bucket"], first["modules"], first["bytes"]) == (0, ["ddp.module.2"], 400)
    assert (second["bucket"], second["modules"], second["bytes"]) == (1, ["ddp.module.0"], 800)
    # the work's span, the second bounded by the step's end
    assert (first["start_us"], first["dur_us"]) == (25, 35)
    assert (second["start_us"], second["dur_us"]) == (43, 57)
    # backward's compute (23-40) hid part of bucket 0; nothing hid bucket 1
    assert first["exposed"] == [[40, 60]]
    assert second["exposed"] == [[43, 100]]


def test_a_blocking_python_call_spans_its_label_and_is_all_exposed():
    step = Event("ProfilerStep#0", 0, 50)
    mm = Event("aten::mm", 1, 5, cpu_parent=step)
    label = Event("trnlens.collective:all_reduce@step.py:9#bytes=1024", 6, 40, cpu_parent=step)
    launch = Event("c10d::allreduce_", 6.5, 7, cpu_parent=label)
    inner = Event("aten::empty", 6.6, 6.7, cpu_parent=launch)  # not compute: inside the launch
    work = Event("gloo:all_reduce", 7, 39.5, thread=5)
    (call,) = calls.timeline([step, mm, label, launch, inner, work], None, is_host)["collectives"]
    assert (call["name"], call["path"], call["line"], call["source"]) == (
        "all_reduce", "step.py", 9, "python",
    )  # fmt: skip
    assert (call["start_us"], call["dur_us"], call["bytes"]) == (6, 34, 1024)
    assert call["exposed"] == [[6, 40]]


def test_fsdp_labels_name_the_sharded_module():
    step = Event("ProfilerStep#0", 0, 50)
    fsdp = Event("FSDP::all_gather (layers.0)", 1, 20, cpu_parent=step)
    label = Event("trnlens.collective:all_gather_single@train.py:7#async#bytes=64", 2, 3,
                  cpu_parent=fsdp)  # fmt: skip
    launch = Event("c10d::_allgather_base_", 2.1, 2.9, cpu_parent=label)
    work = Event("gloo:all_gather", 4, 12, thread=5)
    events = [step, fsdp, label, launch, work]
    (call,) = calls.timeline(events, None, is_host, fsdp={"layers.0": "model.layers.0"})[
        "collectives"
    ]
    assert (call["name"], call["line"], call["source"]) == ("all_gather_single", 7, "fsdp")
    assert call["modules"] == ["model.layers.0"]
    assert (call["start_us"], call["dur_us"]) == (4, 8)  # async: the work, not the launch


@pytest.mark.parametrize(
    ("label", "module"),
    [
        ("FSDP::all_gather (layers.0)", "layers.0"),
        ("FSDP::post_backward_reduce (layers.1) [pg=2]", "layers.1"),
        ("FSDP::backward_prefetch for layers.3", "layers.3"),
        ("FSDP::all_gather", ""),
        ("FSDP::root_pre_forward", None),
    ],
)
def test_fsdp_label_names(label, module):
    assert calls._fsdp_module(label) == module


def test_an_unlabelled_launch_keeps_its_c10d_name_and_no_line():
    step = Event("ProfilerStep#0", 0, 50)
    launch = Event("c10d::_reduce_scatter_base_", 2, 3, cpu_parent=step)
    (call,) = calls.timeline([step, launch], None, is_host)["collectives"]
    assert (call["name"], call["path"], call["source"]) == ("reduce_scatter_tensor", None, "c10d")
    assert (call["start_us"], call["dur_us"]) == (2, 1)  # no work seen: the launch


def test_on_cuda_the_reducer_launches_on_autograds_thread_and_kernels_are_the_work():
    """What an H200 showed (bench/gpu_collectives_check.py): DDP's launch on autograd's device
    thread, outside the backward() label's thread; nccl's kernel is the work, compute kernels
    hide it."""
    step = Event("ProfilerStep#0", 0, 100, thread=1)
    backward = Event("trnlens.collective:issuer:backward@train.py:30", 5, 95, thread=1,
                     cpu_parent=step)  # fmt: skip
    launch = Event("c10d::allreduce_", 20, 22, thread=2)
    gemm = Event("sm90_xmma_gemm", 21, 40, device_type="DeviceType.CUDA")
    nccl = Event("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 30, 60, device_type="DeviceType.CUDA")
    got = calls.timeline([step, backward, launch, gemm, nccl], None, is_host, ddp=DDP)
    (call,) = got["collectives"]
    assert (call["path"], call["line"], call["source"], call["bucket"]) == (
        "train.py",
        30,
        "ddp",
        0,
    )
    assert (call["start_us"], call["dur_us"]) == (30, 30)
    assert call["exposed"] == [[40, 60]]  # the gemm hid 30-40
