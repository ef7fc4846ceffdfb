"""The code a run executed outside the project: the static rules on it, measured, and its fixes.

``rules.attach(result)`` reads the library files a run's attribution pass saw (``frames``,
``modules``), runs the static analysis over their text (never importing them) and adds
``library_findings`` to the result: each finding at its library line, with the run's measured
cost and the project lines that called it. ``swap`` turns such a finding into a module swap: a
variant for ``trnlens compare --fix`` and the helper the quick fix writes into the user's code.
Never imports torch.
"""
