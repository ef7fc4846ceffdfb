"""Jupyter notebooks as Python source: code cells joined into one module, IPython syntax skipped,
every line of the module mapped back to its cell and its line there.

Pure stdlib on purpose: the agent runs a notebook's cells as a module with it, and the server
(``trnlens check``, the language server) imports it too, so both count lines the same way.
"""
