"""The variants that measure an analysis fix: the original, the fixed code, the compiled original.

Shared by ``trnlens compare --fix`` and the language server's Compare lens / Measure the fix
action. Pure (no torch): the fixed code goes to the agent as source text (a finding's
``variant_source``), exec'd in a copy of the module's globals in place of the function.
"""

from __future__ import annotations

from collections.abc import Iterable

from trnlens.analysis import Finding


class NoFix(Exception):
    """The analysis has no fix for that function; the message says so."""


def fixable(findings: Iterable[Finding], qualname: str, code: str | None = None) -> list[Finding]:
    """The findings in ``qualname`` with a fused alternative (optionally only ``code``'s), each
    fixed source once."""
    found, seen = [], set()
    for finding in findings:
        if finding.qualname != qualname or not finding.variant_source:
            continue
        if code is not None and finding.code != code:
            continue
        if finding.variant_source in seen:
            continue
        seen.add(finding.variant_source)
        found.append(finding)
    return found


def compiled_variants(path: str, qualname: str) -> list[dict]:
    """``[original, compiled original]``: what a function without a fix is compared with."""
    return [
        {"path": path, "qualname": qualname, "label": qualname},
        {"path": path, "qualname": qualname, "compile": True, "label": f"{qualname} (compiled)"},
    ]


def fix_variants(
    path: str, qualname: str, findings: Iterable[Finding], code: str | None = None
) -> list[dict]:
    """``[original, fixed (one per fix), compiled original]`` for the engine; raises NoFix."""
    fixes = fixable(findings, qualname, code)
    if not fixes:
        which = f" {code}" if code else ""
        raise NoFix(f"the analysis has no{which} fix for {qualname}")
    variants: list[dict] = [{"path": path, "qualname": qualname, "label": qualname}]
    for finding in fixes:
        variant = {
            "path": path,
            "qualname": qualname,
            "source": finding.variant_source,
            "label": f"{qualname} (fixed: {finding.code})",
        }
        if "." in qualname:  # a method: the source defines it, set on the instance
            variant["replaces"] = qualname
        variants.append(variant)
    variants.append(
        {"path": path, "qualname": qualname, "compile": True, "label": f"{qualname} (compiled)"}
    )
    return variants
