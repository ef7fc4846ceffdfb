"""``%trnlens profile CALL`` and ``%%trnlens``: the IPython side of the kernel extension.

``%trnlens profile model(x)`` evaluates ``model`` and ``x`` in the notebook's namespace (the
objects earlier cells built), profiles the call with the agent's Runner in this process
(live_run.py), prints the compact table and stores the run. ``%%trnlens`` profiles the cell's
body. Options go before the call: ``--steps N --warmup N --repeats N --backend B --mode M
--notebook PATH``. Interrupting the kernel stops the run: the profiler is left by its ``with``,
the modules get their training flags back, nothing is stored.
"""

from __future__ import annotations

import ast
import os
import shlex
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class

from trnlens.kernel import live_run, table

USAGE = (
    "usage: %trnlens profile [--steps N] [--warmup N] [--repeats N] [--backend B] [--mode M] "
    "[--notebook PATH] CALL   (or a %%trnlens [options] cell)"
)
_INT_OPTIONS = ("steps", "warmup", "repeats")
_OPTIONS = (*_INT_OPTIONS, "backend", "mode", "notebook")


def options_and_rest(words: list[str]) -> tuple[live_run.RunOptions, list[str]]:
    found = live_run.RunOptions()
    while words and words[0].startswith("--"):
        name = words.pop(0)[2:]
        if name not in _OPTIONS or not words:
            raise live_run.LiveRunError(USAGE)
        value = words.pop(0)
        if name in _INT_OPTIONS:
            if not value.isdigit():
                raise live_run.LiveRunError(f"--{name} takes a whole number, got {value!r}")
            setattr(found, name, int(value))
        else:
            setattr(found, name, value)
    return found, words


@magics_class
class TrnlensMagics(Magics):
    @line_cell_magic
    def trnlens(self, line: str, cell: str | None = None) -> None:
        try:
            result = self._run(line, cell)
        except live_run.LiveRunError as exc:
            print(f"trnlens: {exc}")
            return
        except KeyboardInterrupt:
            print("trnlens: interrupted; the run stopped and nothing was stored")
            return
        print(table.compact(result))

    def _run(self, line: str, cell: str | None) -> dict:
        shell = self.shell
        assert shell is not None  # a registered magic always has its shell
        namespace = shell.user_ns
        transform = shell.transform_cell
        if cell is not None:
            options, rest = options_and_rest(shlex.split(line))
            if rest:
                raise live_run.LiveRunError(USAGE)
            count = shell.execution_count
            filename = f"<trnlens cell {count}-{os.getpid()}>"
            body = transform(cell)
            function = live_run.cell_function(body, filename, namespace)
            call: tuple[Any, tuple, dict] = (function, (), {})
            return live_run.profile(call, namespace, transform, options, (filename, cell))
        words = line.split(None, 1)
        if not words or words[0] != "profile" or len(words) < 2:
            raise live_run.LiveRunError(USAGE)
        head, _, expression = _split_options(words[1])
        options, _ = options_and_rest(shlex.split(head))
        call = _evaluate_call(expression, namespace)
        return live_run.profile(call, namespace, transform, options)


def _split_options(text: str) -> tuple[str, str, str]:
    """(the options, "", the call expression): options are ``--name value`` pairs in front."""
    words = text.split()
    used = 0
    while used + 1 < len(words) and words[used].startswith("--"):
        used += 2
    head = " ".join(words[:used])
    rest = text.strip()
    for word in words[:used]:
        rest = rest[rest.index(word) + len(word) :]
    return head, "", rest.strip()


def _evaluate_call(expression: str, namespace: dict[str, Any]) -> tuple[Any, tuple, dict]:
    """``f(a, b=c)``: f, its positional and its keyword arguments, each evaluated in the
    notebook's namespace (the objects earlier cells built), the call itself not made."""
    try:
        node = ast.parse(expression, mode="eval").body
    except SyntaxError as exc:
        raise live_run.LiveRunError(f"not a call: {expression!r} ({exc.msg})") from None
    if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
        raise live_run.LiveRunError(f"profile takes a call, like fn(x) or model(x): {expression!r}")

    def value(part: ast.expr) -> Any:
        return eval(compile(ast.Expression(part), "<trnlens>", "eval"), namespace)  # noqa: S307

    func = value(node.func)
    args = tuple(value(a) for a in node.args)
    kwargs = {k.arg: value(k.value) for k in node.keywords if k.arg is not None}
    return func, args, kwargs


def load(ipython: Any) -> None:
    ipython.register_magics(TrnlensMagics)
