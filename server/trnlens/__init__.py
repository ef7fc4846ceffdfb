"""trnlens: profile PyTorch functions on Trainium, CUDA or the CPU from the editor.

The language server and the CLI live here; ``trnlens.agent`` is the standalone part that runs on the
target next to torch. Nothing in this package (outside ``agent/``) imports torch.
"""

__version__ = "0.1.0"


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext trnlens`` in a Jupyter kernel: the ``%trnlens`` magics (trnlens/kernel/)."""
    from trnlens.kernel.magics import load

    load(ipython)
