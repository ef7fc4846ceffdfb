"""What a run's figures do to a static finding's severity.

A static finding is a hazard until a run measured it (``analysis.model``: syncs and patterns
without a proven fix are information, a sync the code needs a hint). When a placed run timed the
finding's lines and they took at least the hotspot share of that run's time
(``trnlens.hotspotThreshold``, the same bar as the hotspot diagnostics), the finding is raised one
level: a costly sync becomes a warning, a costly needed sync information. A proven fix stays a
warning whatever the run says: the fix is worth applying either way.
"""

from __future__ import annotations

from lsprotocol import types

from trnlens.analysis import Finding
from trnlens.analysis.model import NOT_TIMED

_RAISED = {"hint": "info", "info": "warning"}
_LSP = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


def lsp_severity(severity: str) -> types.DiagnosticSeverity:
    return _LSP.get(severity, types.DiagnosticSeverity.Warning)


def severity(finding: Finding, share: float | None, threshold: float) -> str:
    """The severity to show, given the share of its run's time the finding's lines took."""
    if share is None or share < threshold:
        return finding.severity
    return _RAISED.get(finding.severity, finding.severity)


def message(finding: Finding, measured: str | None) -> str:
    """The finding's message, its "not measured" note replaced by the figures once measured."""
    if not measured:
        return finding.message
    return f"{finding.message.removesuffix(NOT_TIMED)}\n{measured}"
