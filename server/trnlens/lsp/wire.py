"""The server's cattrs converters: pygls's, plus lenses already in their JSON form; and the
commands' arguments (``command_args``), structured strictly.

Code lenses are rebuilt only when their document changes (see ``lenses.LensCache``) and kept as
plain JSON-shaped dicts, so an unchanged lens is not built and unstructured again on every
``textDocument/codeLens``: on a 2,000-line file that was most of the request's time. pygls
unstructures a response through the hook registered for its declared element type, so the hook
for ``CodeLens`` passes such dicts through and unstructures real ``CodeLens`` objects as before.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
from cattrs import ClassValidationError, Converter, transform_error
from cattrs.gen import make_dict_structure_fn, override
from lsprotocol import types
from pygls.protocol import default_converter


class JsonLenses(list[Any]):
    """A ``textDocument/codeLens`` answer whose lenses are mostly JSON dicts already.

    pygls sends a server's answer as a ``JsonRPCResponseMessage`` whose ``result`` is ``Any``,
    unstructured by the value's runtime type: a plain list would have every dict walked key by
    key (1.5 M calls, about 0.1 s of the loop for the 5,000 lenses of a 50,000-line file); this
    type's hook looks at each lens once."""


def converter() -> Converter:
    made = default_converter()
    lens = made.get_unstructure_hook(types.CodeLens)

    def unstructure_lens(value: Any) -> Any:
        return value if isinstance(value, dict) else lens(value)

    made.register_unstructure_hook(types.CodeLens, unstructure_lens)
    made.register_unstructure_hook(JsonLenses, lambda found: [unstructure_lens(x) for x in found])
    return made


@functools.cache
def shared_converter() -> Converter:
    """The process's one converter: pygls's protocol and the notebook cells' requests both use
    it, so the hooks written once (``warm``) serve both."""
    return converter()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _strict(kind: type) -> Callable[[Any, Any], Any]:
    """cattrs' own hooks convert (``str(1)`` is ``"1"``): a command's argument must already be
    of the declared JSON type, or the command is refused."""

    def structure(value: Any, _: Any) -> Any:
        # bool is an int to Python, not to a JSON schema
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise TypeError(f"expected {_JSON_NAMES[kind]}, got {_json_name(value)}")
        return value

    return structure


_JSON_NAMES = {str: "a string", int: "an integer", bool: "true or false"}


def _json_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {str: "a string", int: "a number", float: "a number", dict: "an object",
            list: "an array"}.get(type(value), type(value).__name__)  # fmt: skip


def arguments_converter() -> Converter:
    """The converter of the commands' arguments (``command_args``): strict JSON types, camelCase
    keys."""
    made = Converter()
    for kind in (str, int, bool):
        made.register_structure_hook(kind, _strict(kind))

    def hook_for(cls: type) -> Callable[[Any, Any], Any]:
        renames = {f.name: override(rename=_camel(f.name)) for f in attrs.fields(cls)}
        # mypy takes **renames for the keyword options before the overrides
        return make_dict_structure_fn(cls, made, **renames)  # type: ignore[arg-type]

    made.register_structure_hook_factory(attrs.has, hook_for)
    return made


_ARGUMENTS = arguments_converter()
T = TypeVar("T")


class BadArgument(ValueError):
    """A command's argument that does not fit its type; the message names each problem."""


def structure_argument(args: tuple[Any, ...], kind: type[T]) -> T:
    """The command's one object argument as ``kind`` (no argument, or null: an empty object)."""
    value = args[0] if args else None
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise BadArgument(f"takes one object argument, not {_json_name(value)}")
    try:
        return _ARGUMENTS.structure(value, kind)
    except Exception as exc:  # cattrs' ClassValidationError, or a hook's error
        problems = (
            transform_error(exc, path="") if isinstance(exc, ClassValidationError) else [str(exc)]
        )
        raise BadArgument("; ".join(_readable(p) for p in problems)) from None


def _readable(problem: str) -> str:
    """cattrs' 'required field missing @ $.run_id' as 'runId: required field missing' (the
    key's name on the wire)."""
    text, _, where = problem.rpartition(" @ ")
    return f"{_camel(where.lstrip('$.'))}: {text}" if where and text else problem


# What an ``Any`` field (a command's arguments, a diagnostic's data) holds, each dispatched by
# its runtime class.
_JSON_VALUES = (dict, list, str, int, float, bool, type(None))


def reachable(roots: list[Any]) -> list[Any]:
    """Every type reachable from ``roots`` through attrs fields and type arguments, each once:
    what cattrs looks up while converting them (classes, and generics such as
    ``Sequence[DiagnosticTag]``, which it structures by their declared type)."""
    seen: dict[Any, None] = {}

    def walk(kind: Any) -> None:
        if isinstance(kind, str) or kind in seen:
            return
        arguments = typing.get_args(kind)
        if not isinstance(kind, type) and not arguments:
            return  # Any, a TypeVar: nothing cattrs writes a hook for
        seen[kind] = None
        for arg in arguments:
            walk(arg)
        if attrs.has(kind):
            for field in attrs.fields(kind):
                walk(field.type)

    for root in roots:
        walk(root)
    return list(seen)


def warm(
    made: Converter,
    structure: Sequence[Any] = (),
    unstructure: Sequence[Any] = (),
) -> None:
    """Has ``made`` write now the hooks it would otherwise write on first use.

    cattrs generates a class's hook the first time a value of it is converted, and for a union
    (``CodeAction | Command``, a result typed ``Any``) only when a value of that class turns up,
    so the first code action or hover answered would generate code on the event loop: 70-80 ms
    of CPU on CI's machine, which its loop guard caught. Called before the loop runs.

    cattrs keeps the hooks it writes in a cache that it empties whenever it registers one for a
    new list type (``gen_unstructure_iterable``), which writing a class's hook does: so the walk
    is repeated until a pass writes nothing new."""
    # (the dispatch caches are functools.lru_cache wrappers: cache_info counts what was written)
    passes: tuple[tuple[Any, list[Any], Callable[[Any], Any]], ...] = (
        (made._structure_func.dispatch, reachable(list(structure)), made.get_structure_hook),
        # A value is unstructured by its runtime class: the generics' hooks are not looked up.
        (made._unstructure_func.dispatch,
         [k for k in reachable([*unstructure, *_JSON_VALUES]) if isinstance(k, type)],
         made.get_unstructure_hook),
    )  # fmt: skip
    for cache, kinds, hook in passes:
        for _ in range(_MOST_PASSES):
            misses = cache.cache_info().misses
            for kind in kinds:
                hook(kind)
            if cache.cache_info().misses == misses:
                break


# A pass registers only list types not seen before; in practice the second pass writes nothing.
_MOST_PASSES = 6
