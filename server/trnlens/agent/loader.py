"""Importing the user's code: the profiled file, the project modules it imports, unsaved buffers.

Each request imports the project's modules afresh (earlier copies are dropped from
``sys.modules``), so a run never measures old code. Unsaved editor buffers come with the request
as ``files`` and are served by a meta-path finder instead of the text on disk; linecache learns
them too, so tracebacks quote what the user sees.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import os
import sys
import types
from dataclasses import dataclass, field

from . import errors
from .notebook import cells as notebook_cells

_ENV_DIRS = ("site-packages", "dist-packages", ".venv", "venv", ".tox", ".nox")


@dataclass
class Project:
    root: str
    files: dict[str, str] = field(default_factory=dict)  # absolute path -> unsaved buffer text

    def is_project_file(self, filename: str) -> bool:
        if not filename or filename.startswith("<"):
            return False
        path = os.path.abspath(filename)
        if path in self.files:
            return True
        if not path.startswith(self.root.rstrip(os.sep) + os.sep):
            return False
        parts = set(os.path.relpath(path, self.root).split(os.sep))
        return not parts.intersection(_ENV_DIRS) and not path.startswith(_AGENT_DIR)

    def is_user_module_file(self, filename: str) -> bool:
        """This project's files, or files from where earlier requests put users' code."""
        if self.is_project_file(filename):
            return True
        path = os.path.abspath(filename)
        roots = tuple(d.rstrip(os.sep) + os.sep for d in _USER_DIRS)
        return path.startswith(roots) and not set(path.split(os.sep)).intersection(_ENV_DIRS)

    def relpath(self, filename: str) -> str:
        return errors.relative_to(self.root, os.path.abspath(filename))

    def read(self, path: str) -> str:
        """The file's Python text: a notebook's is its code cells joined (notebook/cells.py)."""
        path = os.path.abspath(path)
        if is_notebook(path):
            return self.notebook(path).text
        return self._read_raw(path)

    def _read_raw(self, path: str) -> str:
        if path in self.files:
            return self.files[path]
        with open(path, encoding="utf-8") as handle:
            return handle.read()

    def notebook(self, path: str) -> notebook_cells.Joined:
        """A notebook's code cells as one module, and where each cell's lines are in it."""
        try:
            return notebook_cells.join_notebook(self._read_raw(os.path.abspath(path)))
        except notebook_cells.NotebookError as exc:
            raise errors.usage(f"{self.relpath(path)}: {exc}") from None


def is_notebook(path: str) -> bool:
    return path.endswith(".ipynb")


_AGENT_DIR = os.path.dirname(os.path.abspath(__file__))
_OWN_PACKAGE = __name__.partition(".")[0]  # "trnlens_agent" when shipped, "trnlens" in place


class _BufferLoader(importlib.abc.Loader):
    def __init__(self, path: str, text: str):
        self.path, self.text = path, text

    def create_module(self, spec):
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__file__ = self.path
        code = compile(self.text, self.path, "exec", dont_inherit=True)
        exec(code, module.__dict__)


class _BufferFinder(importlib.abc.MetaPathFinder):
    """Serves unsaved buffer text for project modules found at the overridden paths."""

    def __init__(self, files: dict[str, str]):
        self.files = files

    def find_spec(self, name, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not spec.origin:
            return None
        origin = os.path.abspath(spec.origin)
        if origin not in self.files:
            return None
        is_package = os.path.basename(origin) == "__init__.py"
        return importlib.util.spec_from_loader(
            name, _BufferLoader(origin, self.files[origin]), origin=origin, is_package=is_package
        )


# Directories this process put on sys.path for users' code, over all requests so far.
_USER_DIRS: set[str] = set()


def _add_search_dir(directory: str) -> None:
    directory = os.path.abspath(directory)
    _USER_DIRS.add(directory)
    if directory not in sys.path:
        sys.path.insert(0, directory)


def materialize(root: str, sources: dict[str, str], prune: bool = False) -> None:
    """Writes shipped project files (``sources``: relative path -> text) under ``root``.

    A remote run sends the files it needs inside the request, saving a round trip; a path that
    would land outside ``root`` is refused. Files whose text is unchanged are not rewritten (the
    warm agent keeps their modules). With ``prune``, other ``.py`` files under ``root`` (left by
    earlier runs) are removed, so nothing the user deleted can still be imported.
    """
    base = os.path.abspath(root)
    wanted = set()
    for relative, text in sources.items():
        path = os.path.abspath(os.path.join(base, relative))
        if os.path.isabs(relative) or not path.startswith(base + os.sep):
            raise errors.usage(f"refusing to write {relative!r} outside the project")
        wanted.add(path)
        try:
            with open(path, encoding="utf-8") as handle:
                if handle.read() == text:
                    continue
        except (OSError, UnicodeDecodeError):
            pass
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    if prune and sources:
        for directory, _, names in os.walk(base):
            for name in names:
                path = os.path.join(directory, name)
                if name.endswith(".py") and path not in wanted:
                    os.remove(path)


def forget_user_modules(project: Project) -> None:
    """Drops the modules loaded from users' code (this project's, or an earlier request's), so
    the next import reads the current text. Installed packages are never touched."""
    roots = tuple(d.rstrip(os.sep) + os.sep for d in _USER_DIRS | {project.root})
    for name, module in list(sys.modules.items()):
        filename = getattr(module, "__file__", None)
        if not filename or name == "__main__" or name.partition(".")[0] == _OWN_PACKAGE:
            continue
        path = os.path.abspath(filename)
        if project.is_project_file(path) or (
            path.startswith(roots) and not set(path.split(os.sep)).intersection(_ENV_DIRS)
        ):
            del sys.modules[name]
    importlib.invalidate_caches()


def install(project: Project) -> None:
    """Makes the project importable: buffers first, then its root on sys.path."""
    for finder in list(sys.meta_path):
        if isinstance(finder, _BufferFinder):
            sys.meta_path.remove(finder)
    sys.meta_path.insert(0, _BufferFinder(project.files))
    for path, text in project.files.items():
        lines = text.splitlines(keepends=True)
        linecache.cache[path] = (len(text), None, lines, path)
    _add_search_dir(project.root)


def module_name_for(path: str) -> tuple[str, str]:
    """(dotted module name, directory to put on sys.path) for a file, packages respected."""
    directory, filename = os.path.split(os.path.abspath(path))
    parts = [os.path.splitext(filename)[0]]
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory, package = os.path.split(directory)
        parts.insert(0, package)
    return ".".join(parts), directory


def import_file(project: Project, path: str) -> types.ModuleType:
    """Imports the profiled file under its Python name (package-relative imports work)."""
    path = os.path.abspath(path)
    if path not in project.files and not os.path.isfile(path):
        raise errors.usage(f"no such file: {path}")
    name, search_dir = module_name_for(path)
    _add_search_dir(search_dir)
    if is_notebook(path):
        # A notebook's cells run as one module whose code names the notebook's path; linecache
        # holds the joined text, so tracebacks and line attribution quote the cells' lines.
        text = project.read(path)
        linecache.cache[path] = (len(text), None, text.splitlines(keepends=True), path)
        return _load_as(f"_trnlens_notebook_{name.replace('.', '_')}", path, project)
    existing = sys.modules.get(name)
    if existing is not None and not project.is_project_file(getattr(existing, "__file__", "")):
        # The file's name clashes with an already imported module (say `profile.py` vs the
        # stdlib's): load it under a private name; package-relative imports need no name here.
        return _load_as(f"_trnlens_user_{name.replace('.', '_')}", path, project)
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        if exc.name and name.startswith(exc.name):
            return _load_as(f"_trnlens_user_{name.replace('.', '_')}", path, project)
        raise
    if os.path.abspath(getattr(module, "__file__", "") or "") != path:
        return _load_as(f"_trnlens_user_{name.replace('.', '_')}", path, project)
    return module


def _load_as(name: str, path: str, project: Project) -> types.ModuleType:
    loader = _BufferLoader(path, project.read(path))
    spec = importlib.util.spec_from_loader(name, loader, origin=path)
    if spec is None:  # it only is without a loader, and this one has its own
        raise ImportError(f"no module spec for {path}", name=name, path=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def resolve(module: types.ModuleType, qualname: str):
    """The object at ``qualname`` (``func``, ``Class`` or ``Class.method``) in the module."""
    obj = module
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise errors.usage(
                f"{module.__name__} has no attribute {part!r} (looking up {qualname!r})"
            ) from None
    return obj


# The file name of a variant's source text: the user's own code, run as text (attribution.py
# does not count it as a library).
VARIANT_FILE_PREFIX = "<trnlens variant "


def exec_variant_source(module: types.ModuleType, source: str, label: str) -> dict:
    """Runs a variant's source text (say, a generated fix) in a copy of the module's globals."""
    namespace = dict(module.__dict__)
    filename = f"{VARIANT_FILE_PREFIX}{label}>"
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise errors.usage(f"variant {label!r}: its source does not parse: {exc}") from None
    exec(code, namespace)
    return namespace
