"""What an XLA device's step costs: graphs, compilations and their causes, transfers, CPU
fallbacks and host reads, each at its line (torch-xla's own metrics and IR, docs/neuron.md).

``metrics``: a snapshot of torch_xla.debug.metrics and the difference of two. ``irtext``: the IR
text of a graph (``XLA_IR_DEBUG`` locations) read into nodes, per-line counts and the difference
that made two graphs compile apart. ``recorder``: every call of the step, synchronised and
counted. ``sites``: one step under a dispatch mode that finds the lines of fallbacks and forced
executions. ``summary``: the result's ``xla`` section.
"""
