"""What a profile request answers: one run (a ``Result``) or a comparison of its variants.

Parsed once, where the agent's answer enters the server (jobs.py): everything after reads the
type, never a key (``"variants" in outcome``). Both keep the JSON object as ``data``: the CLI
prints it, the store keeps each run's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trnlens.results import Result, check


@dataclass(frozen=True)
class ComparisonResult:
    """Several variants of a function run on the same inputs; the baseline first."""

    data: dict

    @property
    def variants(self) -> tuple[Result, ...]:
        return tuple(Result(run) for run in self.data["variants"])

    @property
    def comparison_id(self) -> str:
        """The id the store files every variant under: the baseline's run id."""
        return self.data["variants"][0]["run_id"]


Outcome = Result | ComparisonResult


def parse(obj: Any) -> Outcome:
    """The agent's answer as its type; results.SchemaMismatch when it is neither."""
    checked = check(obj)  # a comparison's variants are checked one by one
    return ComparisonResult(checked) if "variants" in checked else Result(checked)


def runs(outcome: Outcome) -> tuple[Result, ...]:
    """Every run of the outcome: the result itself, or each variant of the comparison."""
    return outcome.variants if isinstance(outcome, ComparisonResult) else (outcome,)
