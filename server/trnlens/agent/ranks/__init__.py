"""Several ranks of one function under torchrun, on one host or several: the launch (launch.py,
in the agent), each rank (worker.py, in a process torchrun starts) with what the ranks agree on
(lockstep.py: decisions, barriers, clocks), and the merge of their outcomes (merge.py, and
trace.py for their chrome traces on one axis).

Imports nothing on its own: the server reads merge's and trace's pure functions without pulling
in the launch (which needs the runner). docs/ranks.md says how it all runs.
"""
