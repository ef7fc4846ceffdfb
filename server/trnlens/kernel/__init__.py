"""The IPython extension (``%load_ext trnlens``): profiles inside a running Jupyter kernel with the
objects the notebook already built (magics.py parses the magic, live_run.py runs the agent's
Runner in the kernel's process and stores the run, table.py prints it)."""
