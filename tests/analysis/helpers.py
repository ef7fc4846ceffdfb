"""Helpers for the analysis tests: run a snippet before and after its fix under real torch."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from trnlens.analysis import Finding, analyse_source, apply_fixes

DTYPES = (torch.float32, torch.bfloat16)


def findings(source: str, code: str | None = None, **kwargs: Any) -> list[Finding]:
    found = analyse_source(source, "snippet.py", **kwargs)
    return [f for f in found if code is None or f.code == code]


def namespace() -> dict[str, Any]:
    return {"torch": torch, "nn": torch.nn, "F": torch.nn.functional, "math": math}


def load(source: str, name: str, globals_: dict[str, Any] | None = None) -> Any:
    ns = namespace() if globals_ is None else globals_
    exec(compile(source, "<snippet>", "exec"), ns)
    return ns[name]


def fixed(source: str, code: str) -> str:
    """The snippet with every fix for ``code`` applied; fails when there is none."""
    found = findings(source, code)
    assert found, f"expected a {code} finding"
    assert all(f.fix is not None for f in found), [f.message for f in found]
    out = apply_fixes(source, found)
    assert out != source
    return out


def assert_same_outputs(
    original: Callable[..., Any],
    replacement: Callable[..., Any],
    inputs: Sequence[Any],
    *,
    atol: float | None = None,
    rtol: float | None = None,
) -> None:
    """Equal within the output dtype's default tolerances (or the measured bound given), same
    dtype exactly (``assert_close`` checks it)."""
    with torch.no_grad():
        want = original(*inputs)
        got = replacement(*inputs)
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol)


def random(*shape: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def module_pair(
    original_src: str, fixed_src: str, cls: str, dtype: torch.dtype, *args: Any
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The class built from both sources with identical random parameters, in ``dtype``."""
    a = load(original_src, cls)(*args)
    b = load(fixed_src, cls)(*args)
    torch.manual_seed(1)
    for p in a.parameters():
        p.data.copy_(torch.randn_like(p))
    b.load_state_dict(a.state_dict())
    return a.to(dtype), b.to(dtype)


def assert_bf16_rounding_only(
    original: Callable[..., Any],
    replacement: Callable[..., Any],
    inputs: Sequence[torch.Tensor],
    bound: float,
) -> None:
    """For fixes whose naive original rounds every intermediate to bfloat16 while the fused
    kernel accumulates in float32: same dtype, within the measured ``bound`` of the original,
    and at least as close to the float64 result as the original is."""
    with torch.no_grad():
        want, got = original(*inputs), replacement(*inputs)
        exact = original(*(t.double() for t in inputs))
    assert got.dtype == want.dtype == torch.bfloat16
    assert (got.float() - want.float()).abs().max().item() <= bound
    fused_error = (got.double() - exact).abs().max().item()
    naive_error = (want.double() - exact).abs().max().item()
    assert fused_error <= naive_error
