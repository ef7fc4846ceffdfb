"""Which forward op made each backward node, by the profiler's sequence numbers.

Every op the dispatcher records with grad mode on carries ``sequence_nr``: the autograd sequence
number of its thread when it started (``at::sequence_number::peek()``), and the node an op
creates takes that number (then the counter moves on). The engine runs each node inside an
``autograd::engine::evaluate_function: XBackward0`` event carrying the node's sequence number and
the forward thread (``fwd_thread``). So, per forward thread, the op that made node N is the LAST
op that started with ``sequence_nr == N`` outside the engine: ops before it that made no node
(no input requiring grad, a view of a constant) saw the same number, the op after it the next.

Why this and not hooks: the profiler records the numbers anyway (no cost at run time, nothing
added to the measured steps), they are exact where hooks are not (a node made in a module's
forward by a functional call has no hook of its own), and they hold on every backend where the
profiler records host ops. A node with no number (``AccumulateGrad``, the engine's own) or whose
forward ran before the profiled window keeps the site it ran at: the ``backward()`` line.
"""

from __future__ import annotations

ENGINE_PREFIX = "autograd::engine::evaluate_function: "


def is_node(event) -> bool:
    """The engine's event around one backward node."""
    return event.name.startswith(ENGINE_PREFIX)


def node_name(event) -> str:
    """``MmBackward0`` of ``autograd::engine::evaluate_function: MmBackward0``."""
    return event.name[len(ENGINE_PREFIX) :]


def node_of(event):
    """The backward node ``event`` ran in (its innermost engine event, itself included), or
    None for an event outside the engine: forward work."""
    while event is not None:
        if is_node(event):
            return event
        event = event.cpu_parent
    return None


class BackwardLinks:
    """The forward op of each backward node among one profile's host events."""

    def __init__(self, events):
        engine: set[int] = set()  # ids of the engine's events and everything they ran
        stack = [e for e in events if is_node(e)]
        while stack:
            event = stack.pop()
            if id(event) not in engine:
                engine.add(id(event))
                stack.extend(event.cpu_children)
        self._engine = engine
        # (thread, sequence number) -> the last forward op that started with that number
        creators: dict[tuple, object] = {}
        for event in sorted(events, key=lambda e: e.time_range.start):
            seq = getattr(event, "sequence_nr", -1)
            if seq is None or seq < 0 or id(event) in engine:
                continue
            creators[(getattr(event, "thread", 0), seq)] = event
        self._creators = creators

    def is_backward(self, event) -> bool:
        """Whether ``event`` is work the autograd engine ran (inside a node)."""
        return node_of(event) is not None

    def forward_of(self, event):
        """(node event, the forward op that made the node) for an event the engine ran; (node,
        None) when no forward op in the profile made it; (None, None) for forward work."""
        node = node_of(event)
        if node is None:
            return None, None
        seq = getattr(node, "sequence_nr", -1)
        if seq is None or seq < 0:
            return node, None
        thread = getattr(node, "fwd_thread", None) or getattr(node, "thread", 0)
        return node, self._creators.get((thread, seq))

    def creator(self, seq: int, thread=None):
        """The forward op that made node number ``seq`` (a live node's ``_sequence_nr()``) on
        ``thread``; without a thread, on the one thread that ran forward ops (None when there
        were several: a number is only unique per thread)."""
        if seq is None or seq < 0:
            return None
        if thread is None:
            threads = {key[0] for key in self._creators}
            if len(threads) != 1:
                return None
            thread = next(iter(threads))
        return self._creators.get((thread, seq))
