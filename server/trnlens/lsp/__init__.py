"""The language server: profiles as code lenses, inlay hints, hovers and diagnostics.

``server.py`` wires LSP methods to one module per feature; none of them imports torch (runs go to
the agent through :mod:`trnlens.jobs`).
"""
