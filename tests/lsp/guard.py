"""Runs ``trnlens`` with ``import torch`` forbidden: the language server must never load torch.

An import hook that exits the process (code 97) the moment anything imports torch, so no
``try/except ImportError`` in the server could hide it. The e2e tests start every server this way.
"""

from __future__ import annotations

import os
import sys

TORCH_LOADED = 97


class ForbidTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            sys.stderr.write(f"guard: the server imported {name}\n")
            sys.stderr.flush()
            os._exit(TORCH_LOADED)
        return None


def main() -> int:
    sys.meta_path.insert(0, ForbidTorch())
    stalls = os.environ.get("TRNLENS_LOOP_GUARD")  # session.editor: a stall fails the test
    if stalls:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # run as a script
        import loop_guard

        loop_guard.install(stalls)
    if sys.argv[1:2] == ["--exec"]:  # for the guard's own test: run code under the hook
        exec(sys.argv[2], {"__name__": "__main__"})
        return 0
    from trnlens.cli import main as trnlens_main

    return trnlens_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
