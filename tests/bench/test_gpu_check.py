"""bench/gpu_check.py's checks: hand-made traces for the GPU shapes, a real run on the CPU."""

from __future__ import annotations

from pathlib import Path

from bench import gpu_check


def _x(name, cat, ts, dur, tid=1):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "tid": tid, "pid": 1}


def test_gpu_busy_time_is_the_union_of_device_work_and_the_rest_are_gaps():
    trace = {"traceEvents": [
        _x("ProfilerStep#1", "user_annotation", 0, 100),
        _x("aten::mul", "cpu_op", 1, 5),
        _x("k1", "kernel", 10, 20, tid=7),
        _x("k2", "kernel", 25, 10, tid=8),  # overlaps k1 on another stream: counted once
        _x("copy", "gpu_memcpy", 60, 10, tid=7),
        _x("ProfilerStep#2", "user_annotation", 100, 50),
        _x("k1", "kernel", 110, 30, tid=7),
    ]}  # fmt: skip
    steps = gpu_check.trace_steps(trace, "device")
    assert steps == [
        {"wall_us": 100, "busy_us": 35.0, "gaps_us": 65.0, "device_events": 3},
        {"wall_us": 50, "busy_us": 30.0, "gaps_us": 20.0, "device_events": 1},
    ]


def test_cpu_busy_time_is_the_ops_of_the_steps_thread():
    trace = {"traceEvents": [
        _x("ProfilerStep#1", "user_annotation", 0, 100),
        _x("aten::mean", "cpu_op", 10, 30),
        _x("aten::sum", "cpu_op", 12, 20),  # nested: inside its parent's interval
        _x("aten::mul", "cpu_op", 50, 10),
        _x("aten::mul", "cpu_op", 50, 40, tid=2),  # another thread: not this step's work
    ]}  # fmt: skip
    assert gpu_check.trace_steps(trace, "cpu") == [
        {"wall_us": 100, "busy_us": 40.0, "gaps_us": 60.0, "device_events": 0}
    ]


def _result(device_us, ops, lines, kind="function"):
    return {"device_time_per_step_us": device_us, "variant": {"kind": kind},
            "ops": [{"self_device_us": v} for v in ops],
            "lines": [{"device_us": v} for v in lines]}  # fmt: skip


def test_a_double_count_and_a_wrong_headline_fail_their_checks():
    steps = [{"wall_us": 100.0, "busy_us": 50.0, "gaps_us": 50.0, "device_events": 2}]
    good = {c["name"]: c["ok"] for c in gpu_check.check_run(_result(50, [30, 20], [50]), steps)}
    assert good == {"device time = wall - gaps": True, "ops add up": True, "lines add up": True,
                    "memory pass = allocator peak": None}  # fmt: skip
    # kernels summed next to the host ops that launched them: twice the headline
    doubled = gpu_check.check_run(_result(50, [30, 20, 30, 20], [50]), steps)
    assert [c["ok"] for c in doubled] == [True, False, True, None]
    # a headline that counts more than the device was busy
    inflated = gpu_check.check_run(_result(100, [60, 40], [100]), steps)
    assert inflated[0]["ok"] is False and "gaps" in inflated[0]["detail"]
    compiled = gpu_check.check_run(_result(50, [50], [], kind="compiled"), steps)
    assert compiled[2]["ok"] is None


def test_a_real_cpu_run_passes_every_check(tmp_path: Path):
    (tmp_path / "norms.py").write_text(
        gpu_check.NORMS.format(shape="4, 64, 256", dim=256), encoding="utf-8"
    )
    result = gpu_check._trnlens(
        tmp_path, ["profile", "norms.py::naive", "--inputs", "float32"], "cpu"
    )
    row = gpu_check._summarise("naive", result, tmp_path)
    assert row["dispatches"] == 6 and row["kernels"] is None  # no device-side events on the CPU
    assert {c["name"]: c["ok"] for c in row["checks"]} == {
        "device time = wall - gaps": True, "ops add up": True, "lines add up": True,
        "memory pass = allocator peak": None,  # CUDA only: the CPU's peak is the host's
    }  # fmt: skip
    assert "naive" in gpu_check.render([row])


def test_the_memory_pass_is_checked_against_the_caching_allocators_peak():
    def cuda(pass_peak, allocator_peak, limit=80_000_000_000, memory=True):
        found = {"peak_bytes": pass_peak, "peak_phase": "backward", "limit_bytes": limit}
        return {"backend": "cuda", "peak_memory_bytes": allocator_peak,
                "memory": found if memory else None}  # fmt: skip

    assert gpu_check.memory_check(cuda(105_000_000, 100_000_000))["ok"] is True
    assert gpu_check.memory_check(cuda(150_000_000, 100_000_000))["ok"] is False
    assert gpu_check.memory_check(cuda(100_000_000, 100_000_000, limit=None))["ok"] is False
    assert gpu_check.memory_check(cuda(0, 100_000_000, memory=False))["ok"] is False
    said = gpu_check.memory_check(cuda(105_000_000, 100_000_000))["detail"]
    assert said == (
        "memory pass 105.00 MB (backward) vs max_memory_allocated 100.00 MB; the GPU's memory "
        "80.0 GB"
    )
