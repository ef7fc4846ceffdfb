"""A hand-written form whose comment or docstring says why it is hand-written.

Some naive-looking code is deliberate: a LayerNorm written out because the fused kernel gives
wrong gradients under forward-mode AD, an attention kept explicit for an export path. Where the
function's docstring or comments, its class's docstring, or the comment just above the ``def``
name the fused op (or "fused") together with a reason ("because", "wrong", "bug", "instead
of"...), the finding is still reported (the dispatch count is still true, and the reader can
weigh it) but without a fix: ``--fix`` would bring back whatever the authors wrote it out to avoid.
"""

from __future__ import annotations

import ast
import re

from trnlens.analysis.rules.base import Context

# What each fused-op rule's fix calls, as code and prose name it.
_FUSED = {
    "TRN001": ("rms_norm", "rmsnorm", "rms norm"),
    "TRN002": ("layer_norm", "layernorm", "layer norm"),
    "TRN003": ("softmax",),
    "TRN004": ("gelu",),
    "TRN005": ("silu", "swish"),
    "TRN006": ("scaled_dot_product_attention", "sdpa", "flash attention", "flash_attn"),
    "TRN007": ("log_softmax", "logsoftmax"),
}
_REASON = re.compile(
    r"\b(because|since|instead of|rather than|avoids?|workaround|work around|bugs?|buggy|"
    r"wrong|incorrect|not supported|unsupported|does not support|doesn't support|"
    r"forward[- ]mode|jvp|deliberately|on purpose|intentionally|do not use|don't use)\b",
    re.IGNORECASE,
)


def stated_reason(ctx: Context, code: str) -> str | None:
    """The first comment or docstring passage that gives a reason for writing ``code``'s
    pattern out by hand, shortened; None when there is none."""
    names = _FUSED.get(code)
    if names is None or ctx.func is None:
        return None
    for passage in _passages(ctx):
        lowered = passage.lower()
        if any(n in lowered for n in (*names, "fused")) and _REASON.search(passage):
            text = " ".join(passage.split())
            return text if len(text) <= 100 else text[:97] + "..."
    return None


def _passages(ctx: Context) -> list[str]:
    """Docstring sentences and comments of the function, its class's docstring, and the
    comment lines just above the ``def`` (or its decorators): in the chunk's text for a
    top-level function or a member of a long class too (``source.statement_starts`` keeps them
    with the definition below)."""
    func = ctx.func
    assert func is not None
    found: list[str] = []
    for owner in (func, ctx.owner):
        doc = ast.get_docstring(owner) if owner is not None else None
        if doc:
            found.extend(p for p in re.split(r"\n\s*\n|(?<=\.)\s", doc) if p.strip())
    lines = ctx.src.lines
    first = min([func.lineno, *(d.lineno for d in func.decorator_list)]) - 1
    above = first - 1
    while above >= 0 and lines[above].lstrip().startswith("#"):
        found.append(lines[above].split("#", 1)[1])
        above -= 1
    for line in lines[first : func.end_lineno or first + 1]:
        if "#" in line:
            found.append(line.split("#", 1)[1])
    return found
