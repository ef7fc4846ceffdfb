"""A run's memory words (memoryfigures.py) where only hand-made figures can reach: an XLA
plugin that gives allocator figures (Neuron's, on a Trainium host: none here), a section
without memory. The CPU plugin's real answer is tested in tests/xla/test_xla_training.py."""

from __future__ import annotations

from trnlens import memoryfigures

HELD = {"held_bytes": {"parameters": 4_000_000_000, "gradients": 0, "optimizer_state": 0,
                       "buffers": 2_000}, "held_total_bytes": 4_000_002_000,
        "held_basis": "b"}  # fmt: skip


def test_an_allocator_that_answers_is_said_with_its_use_limit_and_peak():
    allocator = {"bytes_used": 6_000_000_000, "bytes_limit": 16_000_000_000,
                 "peak_bytes_used": 9_000_000_000}  # fmt: skip
    words = memoryfigures.xla_memory_words({"memory": {**HELD, "allocator": allocator}})
    assert words == [
        "held on the device between steps: parameters 4.0 GB · buffers 2.0 KB (4.0 GB in all; "
        "the step's activations and temporaries come and go above it)",
        "the device's allocator: 6.0 GB in use of 16.0 GB, peak 9.0 GB",
    ]
    # fields under other names are said as the plugin names them
    other = memoryfigures.xla_memory_words({"memory": {**HELD, "allocator": {"kb_free": 12}}})
    assert other[1] == "the device's allocator: kb_free 12"


def test_no_memory_no_words():
    assert memoryfigures.xla_memory_words(None) == []
    assert memoryfigures.xla_memory_words({"per_step": {}}) == []
    assert memoryfigures.xla_memory_words({"memory": {"held_bytes": None}}) == []
