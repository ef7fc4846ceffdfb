"""The rule registry: one module per rule family, every rule listed here once."""

from __future__ import annotations

from trnlens.analysis.rules.activations import GeluRule, SiluRule
from trnlens.analysis.rules.attention import AttentionRule
from trnlens.analysis.rules.base import Context, Match, Rule
from trnlens.analysis.rules.graphbreaks import GRAPH_BREAK_RULES
from trnlens.analysis.rules.layernorm import LayerNormRule
from trnlens.analysis.rules.logsoftmax import LogSoftmaxRule
from trnlens.analysis.rules.rmsnorm import RMSNormRule
from trnlens.analysis.rules.softmax import SoftmaxRule
from trnlens.analysis.rules.sync import SYNC_RULES
from trnlens.analysis.rules.xla import XLA_RULES

ALL_RULES: tuple[Rule, ...] = (
    RMSNormRule(),
    LayerNormRule(),
    SoftmaxRule(),
    GeluRule(),
    SiluRule(),
    AttentionRule(),
    LogSoftmaxRule(),
    *SYNC_RULES,
    *GRAPH_BREAK_RULES,
    *XLA_RULES,
)

# Not a pattern rule: the engine reports unreadable or unparsable source under this code.
SYNTAX_CODE = "TRN000"

__all__ = ["ALL_RULES", "SYNTAX_CODE", "Context", "Match", "Rule"]
