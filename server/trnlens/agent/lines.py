"""Per-line attribution: which line of the user's code each op came from.

The profiler cannot say it: ``with_stack`` python events carry a function's *def* line, and aten
ops have no stack unless a verbose config is on. So, in a separate pass, a ``TorchFunctionMode``
wraps every torch call made from project code in ``record_function("trnlens.line:N")``, N naming
the innermost project frame's file and line. Ops then count on that line (``events.line_table``).

The mode changes what it watches (a function mode makes dynamo recompile and run beside the
compiled region), so this pass never produces the headline figures, and compiled callables skip
it: a compiled region is one dispatch on the line that called it.
"""

from __future__ import annotations

import sys
from types import FrameType

from .events import LINE_LABEL


def make_line_mode(torch, is_project_file, relpath):
    from torch.overrides import TorchFunctionMode

    class LineAttributionMode(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.labels: dict[str, tuple[str, int]] = {}
            self._by_site: dict[tuple[str, int], str] = {}
            self._relpaths: dict[str, str | None] = {}

        def _site(self):
            frame: FrameType | None = sys._getframe(2)
            while frame is not None:
                filename = frame.f_code.co_filename
                rel = self._relpaths.get(filename, "")
                if rel == "":
                    rel = relpath(filename) if is_project_file(filename) else None
                    self._relpaths[filename] = rel
                if rel is not None:
                    return rel, frame.f_lineno
                frame = frame.f_back
            return None

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            site = self._site()
            if site is None:
                return func(*args, **kwargs)
            label = self._by_site.get(site)
            if label is None:
                label = f"{LINE_LABEL}{len(self._by_site)}"
                self._by_site[site] = label
                self.labels[label] = site
            with torch.autograd.profiler.record_function(label):
                return func(*args, **kwargs)

    return LineAttributionMode()
