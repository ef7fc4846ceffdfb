"""How far a run's step times can be trusted: medians, spreads, and the profiler's inflation.

Step times are summarised by their median (one slow step, a page fault or a context switch, must
not move the figure) with min and max beside it. Two things make figures mislead, and the result
then says so in plain words, with the likely cause and what to do:

- a wide spread (``(max - min) / median`` above ``WIDE_SPREAD``) in the profiled steps or in the
  timing pass: a busy machine, OpenMP threads waking up between small ops, or too few steps;
- the profiled steps taking more than ``OVERHEAD_LIMIT`` times the unprofiled ones (the timing
  pass): the profiler's per-op cost inflates code made of many small ops, so the unprofiled median
  is the time to believe (the editor's lens then shows it);
- steps that still fault in fresh memory after settling (``page_faults``, the median per step):
  the allocator gives big tensors' pages back to the OS and every step zeroes new ones, which
  can make a step several times slower than the same step on reused memory.

Pure stdlib: part of the agent.
"""

from __future__ import annotations

import mmap
import statistics

WIDE_SPREAD = 0.5
PAGE_SIZE = mmap.PAGESIZE
OVERHEAD_LIMIT = 1.5
FEW_STEPS = 10  # fewer profiled steps or timing calls than this: say "too few steps" as a cause
ADVICE = (
    "more steps (--steps), more timing calls (--repeats), or fewer threads "
    "(OMP_NUM_THREADS=1 or torch.set_num_threads(1)) on a shared machine, which makes steps "
    "steadier though often slower: compare runs made with the same setting"
)
# Why "often slower": the naive RMSNorm at (4, 512, 2048) took 27 ms a step on one thread against
# 5 ms on two on the 2-core machine this was measured on; the spread is what fewer threads buy.


ADVICE_PREFIX = "to steady these figures, try "


def is_stability_warning(text: str) -> bool:
    """Whether a result's warning is one of :func:`assess`'s (the editor's hover repeats them)."""
    return (
        text.startswith("the profiled steps took ")
        or text.startswith(ADVICE_PREFIX)
        or " times vary widely (" in text
        or text.startswith("every step faults in fresh memory")
    )


def summary(samples: list[float], faults: list[int] | None = None) -> dict | None:
    """{median_us, min_us, max_us, steps[, page_faults]} of step times in microseconds (None
    without any), with the median page faults per step when counted."""
    if not samples:
        return None
    found = {
        "median_us": statistics.median(samples),
        "min_us": min(samples),
        "max_us": max(samples),
        "steps": len(samples),
    }
    if faults:
        found["page_faults"] = statistics.median(faults)
    return found


def profiled_summary(samples: list[float], faults: list[int]) -> dict | None:
    """The profiled steps' :func:`summary`, its median and range over the steps that took no
    page fault when at least two did and some did not (``faulted_steps`` says how many were
    left out). Under the profiler a step in two or three faults for its first several steps:
    the profiler's event buffers grow on the heap between the tensors and displace them, a
    cost of the profiler, not of the code (the timing pass, without it, settles). Code that
    faults every step keeps every step, and ``page_faults`` stays the median over all of them.
    """
    calm = [sample for sample, count in zip(samples, faults, strict=True) if count == 0]
    if not faults or len(calm) < 2 or len(calm) == len(samples):
        return summary(samples, faults)
    found = summary(calm)
    assert found is not None
    found["page_faults"] = statistics.median(faults)
    found["faulted_steps"] = len(samples) - len(calm)
    return found


def kept_steps(samples: list[float], faults: list[int]) -> list[int]:
    """The indices of the steps :func:`profiled_summary` keeps: the headline's other medians
    are taken over the same steps."""
    calm = [i for i, count in enumerate(faults) if count == 0]
    if not faults or len(faults) != len(samples) or len(calm) < 2 or len(calm) == len(samples):
        return list(range(len(samples)))
    return calm


def spread(figures: dict | None) -> float | None:
    """(max - min) / median of a summary (or of the timing pass's figures)."""
    if not figures or not figures.get("median_us"):
        return None
    return (figures["max_us"] - figures["min_us"]) / figures["median_us"]


def assess(
    profiled: dict | None,
    timing: dict | None,
    busy: bool = False,
    threads: int | None = None,
) -> tuple[dict, list[str]]:
    """The result's ``stability`` object and the warnings that go with it.

    ``busy``: the machine's load exceeded its cores during the run; ``threads``: the intra-op
    threads of the CPU backend (None elsewhere), for the OpenMP cause."""
    overhead = None
    if profiled and timing and timing.get("median_us"):
        overhead = profiled["median_us"] / timing["median_us"]
    profiled_spread, timing_spread = spread(profiled), spread(timing)
    inflated = overhead is not None and overhead > OVERHEAD_LIMIT
    wide = [
        (name, figures, value)
        for name, figures, value in (
            ("profiled steps'", profiled, profiled_spread),
            ("timing pass's", timing, timing_spread),
        )
        if figures is not None and value is not None and value > WIDE_SPREAD
    ]
    warnings = []
    causes = _causes(profiled, timing, busy, threads)
    if inflated and profiled and timing:  # inflated: both were measured
        warnings.append(
            f"the profiled steps took {overhead:.1f}x the unprofiled ones (median "
            f"{_ms(profiled['median_us'])} vs {_ms(timing['median_us'])}): the profiler's "
            "per-op cost inflates code made of many small ops; the timing pass's median is the "
            f"time to trust (likely cause: {causes or 'the profiler itself'})"
        )
    for name, figures, value in wide:
        count = figures.get("steps", figures.get("repeats"))
        warnings.append(
            f"the {name} times vary widely ({_ms(figures['min_us'])} to "
            f"{_ms(figures['max_us'])}, median {_ms(figures['median_us'])} over {count}; spread "
            f"{value:.0%}): these figures "
            f"are not stable (likely cause: {causes or 'other work on the machine'})"
        )
    if warnings:  # the advice once, however many figures it concerns
        warnings.append(ADVICE_PREFIX + ADVICE)
    # The timing pass's figures are the ones to trust: faults only in the profiled steps are
    # named as a cause of the profiler's inflation above, not as the code's own cost.
    faults = (timing if timing and "page_faults" in timing else profiled or {}).get("page_faults")
    faults = faults or 0
    if faults:
        warnings.append(
            f"every step faults in fresh memory (median {faults:,.0f} page faults per step, "
            f"about {_bytes(faults * PAGE_SIZE)}): the host allocator gives big tensors' memory "
            "back to the OS between steps, so each step pays for new pages and its time "
            "includes that (a step on reused memory can be several times faster); with glibc, "
            "MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_, or jemalloc or tcmalloc, keep "
            "the memory for the next step"
        )
    stability = {
        "profiler_overhead": overhead,
        "profiled_spread": profiled_spread,
        "timing_spread": timing_spread,
        "page_faults_per_step": faults,
        "noisy": bool(inflated or wide),
    }
    return stability, warnings


def _causes(profiled: dict | None, timing: dict | None, busy: bool, threads: int | None) -> str:
    found = []
    if busy:
        found.append("a busy machine")
    if (profiled or {}).get("page_faults", 0) > (timing or {}).get("page_faults", 0):
        found.append("page faults in the profiled steps (fresh memory for big tensors)")
    if threads is not None and threads > 1:
        found.append(f"OpenMP thread wake-ups between ops ({threads} threads)")  # threads > 1 here
    few = (profiled and profiled["steps"] < FEW_STEPS) or (
        timing and timing.get("repeats", FEW_STEPS) < FEW_STEPS
    )
    if few:
        found.append("too few steps")
    return ", ".join(found)


def _bytes(count: float) -> str:
    for unit in ("bytes", "KB", "MB"):
        if count < 1024:
            return f"{count:.0f} {unit}"
        count /= 1024
    return f"{count:.1f} GB"


def _ms(us: float) -> str:
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.3g} µs"
