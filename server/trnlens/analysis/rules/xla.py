"""TRN301-TRN303: what cuts or recompiles an XLA graph, in code written for torch-xla (the
XLA-based torch-neuronx 2.x that optimum-neuron pins; docs/neuron.md).

On an XLA device ops only record a graph; ``torch_xla.sync()`` compiles and runs it. Anything that
needs a value on the host executes the pending graph there (the step becomes two graphs), and an
output whose shape depends on the data falls back to the CPU or makes a new graph per shape.
Reported only in modules that use torch-xla (they import ``torch_xla``, ``torch_neuronx`` or
``optimum.neuron``), as hints (severity ``info``): an XLA run of the function
(``--backend xla``) measures each one (its ``xla`` section: forced executions and CPU fallbacks at
their lines, recompilations with their cause).

- TRN301 ``nonzero`` / ``masked_select`` / ``unique`` / one-argument ``torch.where``: an output
  shape that depends on the data;
- TRN302 ``.item()`` / ``.tolist()`` / ``.numpy()`` / ``.cpu()``: a host read that executes the
  graph where it stands;
- TRN303 a Python ``if`` / ``while`` on a tensor's value: a host read that also bakes the branch
  taken into the graph.

Carried over unchanged from the other families: TRN101-TRN106 (syncs and transfers in loops: on
XLA each one is a forced execution per iteration), TRN001-TRN007 (hand-written norms and
activations: fewer IR nodes); TRN201-TRN204 stay about torch.compile'd functions.
Not covered statically: boolean-mask indexing (``x[x > 0]``), and shapes that change per call
(a length read from the data): the run finds both (CPU fallback at the line; recompiles with
the changed shape at the line).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from trnlens.analysis.rules.base import Context, Match
from trnlens.analysis.rules.graphbreaks import _VALUE_METHODS, _attr_call, _depends_on_values

SEVERITY = "info"
_DATA_SHAPED = frozenset({"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere"})
_HOST_READS = frozenset({"item", "tolist", "numpy", "cpu"})


def uses_xla(ctx: Context) -> bool:
    return ctx.info.imports_xla


@dataclass
class _XlaRule:
    code: str
    name: str
    summary: str
    triggers: frozenset[str]

    def check(self, ctx: Context) -> Iterator[Match]:
        if ctx.func is None or not uses_xla(ctx):
            return
        for node in ctx.nodes:
            message = self.message(ctx, node)
            if message is not None:
                test = getattr(node, "test", None) if not isinstance(node, ast.Call) else None
                yield Match(code=self.code, message=message, node=test or node,
                            severity=SEVERITY)  # fmt: skip

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        raise NotImplementedError


class DataDependentShape(_XlaRule):
    def __init__(self) -> None:
        super().__init__("TRN301", "data-dependent-shape-on-xla",
                         "an output shape that depends on the data on an XLA device",
                         _DATA_SHAPED | {"where"})  # fmt: skip

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        call = _attr_call(node)
        if call is None or not isinstance(node, ast.Call):
            return None
        name = call[1]
        if name == "where":
            if not (isinstance(call[0], ast.Name) and call[0].id in ctx.info.torch):
                return None
            if len(node.args) != 1 or node.keywords:
                return None  # torch.where(cond, a, b) keeps the shape
        elif name not in _DATA_SHAPED:
            return None
        return (
            f"on XLA, `{name}` has an output shape that depends on the data: the pending graph "
            "executes here to know it (and the op may fall back to the CPU); keep a fixed shape "
            "(a mask multiplied in, `torch.where(cond, a, b)`)"
        )


def _is_host_read(node: ast.AST) -> bool:
    call = _attr_call(node)
    return call is not None and call[1] in _HOST_READS


class HostRead(_XlaRule):
    def __init__(self) -> None:
        super().__init__("TRN302", "host-read-on-xla",
                         "a tensor's value read on the host in XLA code", _HOST_READS)  # fmt: skip

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        call = _attr_call(node)
        if call is None or call[1] not in _HOST_READS or not isinstance(node, ast.Call):
            return None
        if node.args or node.keywords:
            return None
        if _is_host_read(call[0]):
            return None  # `t.cpu().numpy()`: the `.cpu()` is the read, reported once
        return (
            f"on XLA, `.{call[1]}()` reads a lazy tensor on the host: the pending graph executes "
            "here, mid-step (a forced execution: two graphs instead of one); read it after "
            "`torch_xla.sync()`, or less often"
        )


class TensorControlFlow(_XlaRule):
    def __init__(self) -> None:
        super().__init__("TRN303", "tensor-control-flow-on-xla",
                         "Python control flow on a tensor's value in XLA code",
                         _VALUE_METHODS)  # fmt: skip

    def message(self, ctx: Context, node: ast.AST) -> str | None:
        if not isinstance(node, ast.If | ast.While | ast.IfExp):
            return None
        if not _depends_on_values(node.test):
            return None
        if any(_is_host_read(sub) for sub in ast.walk(node.test)):
            return None  # `if t.item() == 0:`: TRN302 reports that read, once
        return (
            "on XLA, a Python branch on a tensor's value executes the pending graph to read it, "
            "and the branch taken is baked into the next graph; use `torch.where`"
        )


XLA_RULES = (DataDependentShape(), HostRead(), TensorControlFlow())
