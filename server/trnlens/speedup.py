"""Speed-ups as people should read them: one wording for the CLI, lens, hover and report.

A comparison's speed-up is the baseline's median over the variant's, both over the same
interleaved rounds (the medians the tables show as each variant's headline), and its range the
per-round ratios' 10th-90th percentiles (agent/rounds.py). A range that contains 1.0 means the
rounds did not tell the variants apart: that reads "no measurable difference", never a figure
such as 0.56x that a reader would take as a regression.

A range that excludes 1.0 is not enough either: with 20 rounds on a quiet machine the range
can be narrow enough to exclude 1.0 for a 2% effect of the variants' places in the round or of
a cache one variant warms for the next, and identical code then read "1.02x faster" in 2 trials
of 20 (issue 30). So, as Criterion.rs (its ``noise_threshold``, 1%-5%) and asv (``--factor``)
do, a speed-up within ``NOISE`` of 1.0 (1/1.05 to 1.05) is "no measurable difference" whatever
its range: a change that small is below what a timing on a shared machine can claim.
"""

from __future__ import annotations

from collections.abc import Sequence

SAME = "no measurable difference"
NOT_COMPARABLE = "not comparable"
NOISE = 0.05  # a speed-up within 5% of 1.0 is no measurable difference, whatever its range
METHOD = (
    "speed-up: the baseline's median over the variant's, both over the same interleaved rounds "
    "(the variants timed in turn without the profiler, the order alternating); range: the "
    "per-round ratios' 10th-90th percentiles; within 5% of 1.00x, or with a range containing "
    "1.00x, no measurable difference"
)


def measurable(speedup: float | None, span: Sequence[float] | None) -> bool:
    """Whether a speed-up is a difference: beyond the noise threshold (``NOISE``) and with a
    range that excludes 1.0 (a range-less speed-up, from an old run, needs the threshold only)."""
    if speedup is None:
        return False
    if 1 / (1 + NOISE) <= speedup <= 1 + NOISE:
        return False
    return not (span and len(span) == 2 and span[0] <= 1.0 <= span[1])


def factor(value: float | None, sign: str = "x") -> str:
    return "–" if value is None else f"{value:.2f}{sign}"


def span_text(span: Sequence[float] | None, sign: str = "x", dash: str = "-") -> str:
    if not span or len(span) != 2:
        return "–"
    return f"{span[0]:.2f}{dash}{span[1]:.2f}{sign}"


def verdict(speedup: float | None, span: Sequence[float] | None, sign: str = "x") -> str:
    """'no measurable difference', '1.84x faster' or '0.56x (slower)'; '–' without a figure."""
    if speedup is None:
        return "–"
    if not measurable(speedup, span):
        return SAME
    if speedup >= 1.0:
        return f"{speedup:.2f}{sign} faster"
    return f"{speedup:.2f}{sign} (slower)"


def noisy(variant: dict) -> bool:
    """Whether a variant's own stability verdict says its figures are not stable."""
    return bool((variant.get("stability") or {}).get("noisy"))


def variant_label(v: dict) -> str:
    return (v.get("variant") or {}).get("label") or v["function"]["qualname"]


def variant_warnings(variants: list[dict], shared: list[str]) -> list[str]:
    """Every warning of a comparison and of its variants, each once: one that every variant
    carries (a busy machine) without a name, the others after their variant's label."""
    out = list(dict.fromkeys(shared))
    lists = [v.get("warnings") or [] for v in variants]
    common = set(lists[0]).intersection(*lists[1:]) if lists else set()
    for warning in lists[0] if lists else []:
        if warning in common and warning not in out:
            out.append(warning)
    for v, warnings in zip(variants, lists, strict=True):
        for warning in dict.fromkeys(warnings):
            if warning not in common:
                out.append(f"{variant_label(v)}: {warning}")
    return out
