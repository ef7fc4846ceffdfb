"""Static analysis of PyTorch source: costly patterns found without importing torch.

Stable API (the language server and ``trnlens check`` use only this):

``analyse_source(text: str, path: str = "<string>", select=None, ignore=None, *,
decode_error=None) -> list[Finding]``
    Analyse source text. ``select``/``ignore`` are iterables of codes or prefixes (``"TRN1"``,
    ``"ALL"``). Never raises on bad input: a syntax error is reported as a ``TRN000`` finding and
    the top-level blocks that still parse are analysed.

``analyse_path(path, select=None, ignore=None) -> list[Finding]``
    Read a file as bytes (any encoding; invalid bytes give a ``TRN000`` finding) and analyse it.

``apply_fixes(text: str, findings) -> str``
    The text with every safe fix of ``findings`` applied (overlapping edits: the later one wins).

``Finding`` fields: ``code``, ``message`` (ending in "(static: not measured)"), ``severity``
("error" | "warning" | "info" | "hint", see docs/rules.md), ``location`` / ``end_location`` (aliases
``start`` / ``end``: ``Location(row, column)``, both 1-based, columns in characters, end exclusive,
as in ruff's JSON), ``lsp_range()`` (0-based LSP range), ``filename``, ``qualname`` (``"func"``,
``"Class.method"``, ``"f.<locals>.g"``; None at module level), ``fix`` (``Fix(message, edits,
applicability)``, each ``Edit(content, location, end_location)``), ``variant_source`` (the enclosing
function with the fix applied, dedented, to be exec'd in a copy of the module's globals; it defines
the same name), ``naive_dispatches`` (tensor ops in the matched pattern), ``lines`` (first, last
line the pattern spans) and ``extra`` (``extra["claim"] == "needed"``: a sync the code needs) and
``to_json()`` (ruff's JSON keys plus these).

``RULES``: ``{code: (name, summary)}`` for every rule.

Importing this package never imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable

from trnlens.analysis.engine import analyse_path, analyse_source
from trnlens.analysis.fixes import apply_edits
from trnlens.analysis.model import Edit, Finding, Fix, Location
from trnlens.analysis.rules import ALL_RULES, SYNTAX_CODE

RULES: dict[str, tuple[str, str]] = {r.code: (r.name, r.summary) for r in ALL_RULES}
RULES[SYNTAX_CODE] = ("unparsable-source", "the file could not be read or parsed")


def apply_fixes(text: str, findings: Iterable[Finding]) -> str:
    edits = [e for f in findings if f.fix and f.fix.applicability == "safe" for e in f.fix.edits]
    return apply_edits(text, edits)


__all__ = [
    "RULES",
    "Edit",
    "Finding",
    "Fix",
    "Location",
    "analyse_path",
    "analyse_source",
    "apply_fixes",
]
