"""Attribution through every frame: each dispatch's innermost frame, project line and nn.Module.

The line-attribution pass (``lines.py``, DESIGN.md) labels each torch call with the innermost
*project* line. This mode labels it with two sites at once: that project line and the innermost
frame anywhere (library code included: transformers' ``modeling_llama.py:65``), so a model whose
155 dispatches all sit on the project's one ``out = model(ids)`` line still says where they go.

Modules: global forward pre/post hooks (``register_module_forward_pre_hook`` / ``_forward_hook``)
open a ``record_function("trnlens.module:K")`` around every module call during this pass, so every
dispatch (a compiled region too) finds the module it ran in among its profiler ancestors. Names
come from ``named_modules()`` of the modules reachable from the run's inputs (``input_roots``),
rooted at the parameter's name: ``model.layers.0.input_layernorm``.

Compiled code: inside dynamo's tracing the mode and the hooks do nothing (``is_compiling``), so a
compiled callee traces the graph it would trace without them (dynamo recompiles once for the
changed mode stack and hooks: the pass's first step, before anything is recorded, absorbs it) and
runs as one region: one dispatch, on the module (and line) that called it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import os
import platform
import sys
import sysconfig
import threading
import types
from collections.abc import Mapping

from .events import LINE_LABEL, MODULE_LABEL
from .loader import VARIANT_FILE_PREFIX

_AGENT_DIR = os.path.dirname(os.path.abspath(__file__))


class FrameKinds:
    """Which files are the project's, the agent's own, or torch's call plumbing; cached per file."""

    def __init__(self, is_project_file, relpath, torch):
        self.is_project_file = is_project_file
        self.relpath = relpath
        self._kind: dict[str, str] = {}
        self._display: dict[str, str] = {}
        torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
        # Frames that are the torch-function machinery or module-call plumbing, never the caller.
        self._plumbing = {
            os.path.join(torch_dir, "overrides.py"),
            os.path.join(torch_dir, "nn", "modules", "module.py"),
            os.path.join(torch_dir, "utils", "_device.py"),
            os.path.join(torch_dir, "_dynamo", "eval_frame.py"),  # a compiled callable's wrapper
        }

    def kind(self, filename: str) -> str:
        found = self._kind.get(filename)
        if found is None:
            path = os.path.abspath(filename) if not filename.startswith("<") else filename
            if path.startswith(_AGENT_DIR + os.sep):
                found = "agent"
            elif path in self._plumbing:
                found = "plumbing"
            elif filename.startswith(VARIANT_FILE_PREFIX) or self.is_project_file(filename):
                found = "project"  # a variant's source text (a fix run as text): the user's code
            else:
                found = "other"
            self._kind[filename] = found
        return found

    def display(self, filename: str) -> str:
        """Project files relative (posix), others absolute."""
        found = self._display.get(filename)
        if found is None:
            if filename.startswith("<"):
                found = filename
            elif self.kind(filename) == "project":
                found = self.relpath(filename).replace(os.sep, "/")
            else:
                found = os.path.abspath(filename)
            self._display[filename] = found
        return found

    def walk(self, frame, own_code=None):
        """(innermost frame, innermost project frame) above ``frame`` as (file, line, function)
        tuples (None where there is none). Walking stops at the agent's own frames: a call whose
        nearest frame is trnlens's (training mode's added backward) has no site at all."""
        innermost = project = None
        while frame is not None:
            code = frame.f_code
            kind = self.kind(code.co_filename)
            if kind == "agent":
                break
            if kind != "plumbing" and code is not own_code:
                here = (code.co_filename, frame.f_lineno, code.co_name)
                if innermost is None:
                    innermost = here
                if kind == "project":
                    project = here
                    break
            frame = frame.f_back
        return innermost, project


def make_attribution_mode(torch, kinds: FrameKinds):
    """A ``TorchFunctionMode`` labelling each torch call ``trnlens.line:N``. ``labels`` maps a
    label to its project (path, line) (what ``events.site_of`` reads: labels without a project
    line are left out); ``sites`` to (innermost frame, project frame), raw filenames. The
    line-only mode it extends is ``lines.py``'s (kept: ``options.attribution = "lines"``)."""
    from torch.overrides import TorchFunctionMode

    is_compiling = _is_compiling(torch)
    record_function = torch.autograd.profiler.record_function

    class AttributionMode(TorchFunctionMode):
        def __enter__(self):
            skip_frames(torch, (AttributionMode.__torch_function__,))
            return super().__enter__()

        def __init__(self):
            super().__init__()
            self.labels: dict[str, tuple[str, int]] = {}
            self.sites: dict[str, tuple] = {}
            self._by_key: dict[tuple, str] = {}

        def label_for(self, frame, own_code=None) -> str | None:
            innermost, project = kinds.walk(frame, own_code)
            if innermost is None:  # trnlens's own call (training mode's added backward)
                return None
            key = (innermost, project)
            label = self._by_key.get(key)
            if label is None:
                label = f"{LINE_LABEL}{len(self._by_key)}"
                self._by_key[key] = label
                self.sites[label] = key
                if project is not None:
                    self.labels[label] = (kinds.display(project[0]), project[1])
            return label

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if is_compiling():  # dynamo traces this: stay out of the graph it builds
                return func(*args, **kwargs)
            label = self.label_for(sys._getframe(1), getattr(func, "__code__", None))
            if label is None:
                return func(*args, **kwargs)
            with record_function(label):
                return func(*args, **kwargs)

    return AttributionMode()


def skip_frames(torch, functions) -> None:
    """Tell dynamo to run these functions' frames, and every frame they call, as they are: never
    compiled as frames of their own (a hook called between compiled frames would otherwise become
    an empty compiled region, one more dispatch, with its body skipped). Traced *inside* a
    compiled frame they stay inlined (and do nothing there: ``is_compiling``). Feature-detected:
    a private API; without it the counts of compiled code may include such regions. Nothing to
    do while dynamo is not loaded (then nothing was compiled)."""
    if "torch._dynamo" not in sys.modules:
        return
    try:
        from torch._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy

        strategy = FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP)
        for function in functions:
            set_code_exec_strategy(function.__code__, strategy)
    except Exception:
        pass


def _is_compiling(torch):
    compiler = getattr(torch, "compiler", None)
    found = getattr(compiler, "is_compiling", None)
    return found if found is not None else (lambda: False)


class ModuleInfo:
    __slots__ = ("name", "type", "type_path", "source", "parent", "caller", "called_from")

    def __init__(self, name, module, parent, caller, called_from):
        cls = type(module)
        self.name = name
        self.type = cls.__name__
        self.type_path = f"{cls.__module__}.{cls.__qualname__}"
        self.source = _forward_source(cls)
        self.parent = parent  # the key of the module that was running when this one was called
        self.caller = caller  # innermost project frame at the call (raw file, line, function)
        self.called_from = called_from  # innermost frame at the call


def _forward_source(cls):
    forward = getattr(cls, "forward", None)
    code = getattr(forward, "__code__", None)
    if forward is None or code is None:
        return None
    try:
        path = inspect.getsourcefile(forward) or code.co_filename
    except TypeError:
        path = code.co_filename
    return (path, code.co_firstlineno)


class ModuleTracker:
    """Global module hooks for the attribution pass: a profiler label around each module call,
    the module's name, type and caller. Use as a context manager (hooks removed on exit)."""

    def __init__(self, torch, kinds: FrameKinds, names: dict[int, str], keep: list,
                 labels: bool = True):  # fmt: skip
        self.torch = torch
        # False: no profiler label (the XLA sites step reads ``current()`` instead: a label is
        # an op of its own, which its dispatch mode would see)
        self.labels = labels
        self.kinds = kinds
        self.names = dict(names)  # id(module) -> dotted name
        self._keep = list(keep)  # the named modules stay alive, so their ids stay theirs
        self.info: dict[int, ModuleInfo] = {}  # key -> info
        self._keys: dict[int, int] = {}  # id(module) -> key
        self._stack: list = []  # (key, record_function) of the running module calls
        self._handles: list = []
        self._is_compiling = _is_compiling(torch)
        # The hooks are global, the label stack this thread's: module calls on other threads
        # (the function mode does not see them either) are left alone.
        self._thread = threading.get_ident()

    def __enter__(self):
        hooks = self.torch.nn.modules.module
        skip_frames(self.torch, (ModuleTracker._pre, ModuleTracker._post))
        self._handles = [hooks.register_module_forward_pre_hook(self._pre)]
        try:  # always_call: the label closes when a forward raises too (torch 2.1 and later)
            self._handles.append(hooks.register_module_forward_hook(self._post, always_call=True))
        except TypeError:
            self._handles.append(hooks.register_module_forward_hook(self._post))
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()
        self._handles = []
        while self._stack:  # a forward that raised past its post-hook: close its label
            _, rf = self._stack.pop()
            rf.__exit__(None, None, None)
        return False

    def _name(self, module) -> str:
        name = self.names.get(id(module))
        if name is not None:
            return name
        # Not reachable from the inputs (built inside the function, or a global of a library
        # module, such as the nn.Module wrappers some transformers versions put around functions
        # like the rotary embedding): name it under the running module (the code that called
        # it) by what it stands for, the function it wraps or its class (``<Func>`` and
        # ``<Func>.<Func>`` said nothing, issue 30), once: a name already taken gets ``#2``,
        # ``#3``... Its own submodules are named under it.
        parent_key = self._stack[-1][0] if self._stack else None
        prefix = self.info[parent_key].name + "." if parent_key is not None else ""
        name = unique(f"{prefix}{stands_for(module)}", self._taken())
        for sub_name, sub in module.named_modules():
            if id(sub) not in self.names:
                self.names[id(sub)] = f"{name}.{sub_name}" if sub_name else name
                self._keep.append(sub)
        return self.names[id(module)]

    def _taken(self) -> set[str]:
        return set(self.names.values()) | {info.name for info in self.info.values()}

    def _pre(self, module, args):
        if self._is_compiling() or _is_wrapper(module) or threading.get_ident() != self._thread:
            return None
        key = self._keys.get(id(module))
        if key is None:
            innermost, project = self.kinds.walk(sys._getframe(1))
            parent = self._stack[-1][0] if self._stack else None
            key = len(self.info)
            self.info[key] = ModuleInfo(_clean(self._name(module)), module, parent, project,
                                        innermost)  # fmt: skip
            self._keys[id(module)] = key
            self._keep.append(module)
        rf = _NO_LABEL
        if self.labels:
            rf = self.torch.autograd.profiler.record_function(f"{MODULE_LABEL}{key}")
            rf.__enter__()
        self._stack.append((key, rf))
        return None

    def current(self) -> int | None:
        """The key of the innermost module call running now on the tracked thread."""
        return self._stack[-1][0] if self._stack else None

    def _post(self, module, args, output):
        if self._is_compiling() or _is_wrapper(module) or threading.get_ident() != self._thread:
            return None
        key = self._keys.get(id(module))
        while self._stack:
            top, rf = self._stack.pop()
            rf.__exit__(None, None, None)
            if top == key:
                break
        return None


class _NoLabel:
    def __exit__(self, *exc):
        return False


_NO_LABEL = _NoLabel()


# Where a module that wraps a function keeps it: functools.wraps' __wrapped__, then the names
# wrappers use for it (transformers' function wrappers, torch's own).
WRAPPED_KEYS = ("__wrapped__", "func", "fn", "function", "_func", "_fn", "f")


def stands_for(module) -> str:
    """What a module with no attribute name reads as in the code: the name of the function it
    wraps (an instance attribute holding a function: ``apply_rotary_pos_emb``), else its class
    (``Linear``)."""
    own = vars(module)
    found = [own[key] for key in WRAPPED_KEYS if key in own]
    if not found:  # any one plain function kept on the instance
        found = [v for v in own.values() if isinstance(v, (types.FunctionType,
                                                           types.BuiltinFunctionType))]  # fmt: skip
        found = found if len(found) == 1 else []
    for candidate in found:
        if isinstance(candidate, functools.partial):
            candidate = candidate.func
        name = getattr(candidate, "__name__", None)
        if callable(candidate) and isinstance(name, str) and name.isidentifier():
            return name
    return type(module).__name__


def unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name#2``, ``name#3``... the first one not ``taken``."""
    if name not in taken:
        return name
    number = 2
    while f"{name}#{number}" in taken:
        number += 1
    return f"{name}#{number}"


def _is_wrapper(module) -> bool:
    """torch.compile(model)'s OptimizedModule: the module it wraps is the one users named and
    called (its own hooks run too), so the wrapper gets no entry of its own."""
    return type(module).__name__ == "OptimizedModule" and hasattr(module, "_orig_mod")


class CompiledCallSites:
    """The line that called a compiled function: a compiled region runs no torch call the mode
    could label, so while this is active every call through dynamo's wrapper opens a line label
    for its caller (dynamo's own per-call ``enter_exit_hooks``, reached through a class-level
    property so that functions compiled at import time are covered too; removed on exit).
    Feature-detected: without it a compiled function's region counts on no line (a compiled
    module's still counts on its module's caller)."""

    def __init__(self, torch, mode):
        self.torch = torch
        self.mode = mode
        self._cls = None
        self._touched: list[list] = []

    def __enter__(self):
        if "torch._dynamo" not in sys.modules:  # then nothing was compiled
            return self
        try:
            from torch._dynamo.eval_frame import _TorchDynamoContext as cls
        except Exception:
            return self
        if "enter_exit_hooks" in vars(cls):  # someone else's property: leave it alone
            return self
        enter, touched = self._enter, self._touched

        def get(ctx):
            hooks = ctx.__dict__.setdefault("enter_exit_hooks", [])
            if not any(h is enter for h in hooks):
                hooks.append(enter)
                touched.append(hooks)
            return hooks

        def put(ctx, value):
            ctx.__dict__["enter_exit_hooks"] = value

        skip_frames(self.torch, (CompiledCallSites._enter, get))
        # dynamo declares a per-instance list there; a class-level property standing in for it is
        # the point (it reaches instances made before this), so the declared type cannot hold.
        cls.enter_exit_hooks = property(get, put)  # type: ignore[assignment]
        self._cls = cls
        return self

    def __exit__(self, *exc):
        if self._cls is not None:
            del self._cls.enter_exit_hooks
            self._cls = None
        for hooks in self._touched:
            hooks[:] = [h for h in hooks if h is not self._enter]
        self._touched = []
        return False

    def _enter(self):
        if _is_compiling(self.torch)():
            return _nothing
        label = self.mode.label_for(sys._getframe(1))
        if label is None:
            return _nothing
        rf = self.torch.autograd.profiler.record_function(label)
        rf.__enter__()
        return lambda: rf.__exit__(None, None, None)


def _nothing():
    return None


def _clean(name: str) -> str:
    # torch.compile(model) wraps the module: its submodules sit under "_orig_mod", which no user
    # wrote. The compiled wrapper and the module it wraps keep distinct keys all the same.
    return name.replace("._orig_mod", "")


# -- what the inputs reach


def reachable_modules(torch, roots: list[tuple[str, object]], limit: int = 10_000):
    """(name, module) for every nn.Module reachable from ``roots`` (name, value): the value itself,
    items of lists/tuples/dicts/sets (``models.0``, ``nets.encoder``), and each module's
    ``named_modules()``. A module reached twice keeps its first name."""
    seen: dict[int, tuple[str, object]] = {}
    module_cls = torch.nn.Module

    def visit(name, value, depth):
        if len(seen) >= limit or depth > 4:
            return
        if isinstance(value, module_cls):
            if id(value) in seen:
                return
            for sub_name, sub in value.named_modules(remove_duplicate=True):
                if id(sub) not in seen:
                    seen[id(sub)] = (f"{name}.{sub_name}" if sub_name else name, sub)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for index, item in enumerate(value):
                visit(f"{name}.{index}", item, depth + 1)
        elif isinstance(value, dict):
            for k, item in value.items():
                visit(f"{name}.{k}", item, depth + 1)

    for name, value in roots:
        visit(name, value, 0)
    return list(seen.values())


def input_roots(made, target, torch) -> list[tuple[str, object]]:
    """The run's inputs by the names the user wrote: the instance (``self``), each argument by its
    parameter's name, and module-level nn.Modules the function names (``model = torch.compile(
    model)`` at module level, then ``model(x)`` inside)."""
    roots: list[tuple[str, object]] = []
    if made.instance is not None:
        roots.append(("self", made.instance))
    params: list[str] = []
    function = getattr(target, "forward", target) if made.instance is target else target
    try:
        params = [
            p.name
            for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        pass
    for index, value in enumerate(made.args):
        roots.append((params[index] if index < len(params) else f"args.{index}", value))
    for key, value in made.kwargs.items():
        roots.append((key, value))
    try:
        raw = inspect.unwrap(getattr(function, "__func__", function))
    except ValueError:  # a __wrapped__ cycle
        raw = function
    code = getattr(raw, "__code__", None)
    globals_ = getattr(raw, "__globals__", {})
    if code is not None:
        for name in code.co_names:
            value = globals_.get(name)
            if isinstance(value, torch.nn.Module):
                roots.append((name, value))
    return roots


# -- the library that owns a file

_DISTRIBUTIONS: Mapping[str, list[str]] | None = None
_LIBRARY: dict[str, dict | None] = {}


def library_of(filename: str) -> dict:
    """{name, version} of the installed distribution that owns ``filename`` (via
    importlib.metadata), ``python`` for the standard library, else the top-level package's name
    with an empty version (code on sys.path that no distribution installed), or the file's own
    name for generated code (``<eval_with_key>.3``)."""
    found = _LIBRARY.get(filename)
    if found is not None:
        return found
    if filename.startswith("<"):  # generated code: torch.fx's "<eval_with_key>.3", exec'd text
        return {"name": filename, "version": ""}
    path = os.path.abspath(filename)
    stdlib = sysconfig.get_paths().get("stdlib", "")
    top = _top_level(path)
    if top is None and stdlib and path.startswith(stdlib + os.sep) and "-packages" not in path:
        found = {"name": "python", "version": platform.python_version()}
    elif top is None:
        found = {"name": os.path.basename(os.path.dirname(path)) or path, "version": ""}
    else:
        dists = _distributions().get(top) or []
        version = ""
        name = top
        if dists:
            name = dists[0]
            try:
                version = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                version = ""
        elif stdlib and path.startswith(stdlib + os.sep) and "-packages" not in path:
            name, version = "python", platform.python_version()
        found = {"name": name, "version": version}
    _LIBRARY[filename] = found
    return found


def _distributions() -> Mapping[str, list[str]]:
    global _DISTRIBUTIONS
    if _DISTRIBUTIONS is None:
        try:
            _DISTRIBUTIONS = importlib.metadata.packages_distributions()
        except Exception:  # a broken installed distribution must not fail the run
            _DISTRIBUTIONS = {}
    return _DISTRIBUTIONS


def _top_level(path: str) -> str | None:
    """The top-level module a file belongs to, by the longest sys.path entry above it."""
    best = ""
    for entry in sys.path:
        entry = os.path.abspath(entry or os.getcwd())
        if path.startswith(entry + os.sep) and len(entry) > len(best):
            best = entry
    if not best:
        return None
    first = os.path.relpath(path, best).split(os.sep)[0]
    return first[:-3] if first.endswith(".py") else first
