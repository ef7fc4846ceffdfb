"""Keeping a warm agent honest: reload what changed, isolate runs, know when to start afresh.

A warm agent keeps torch, the backend and compile caches loaded between requests, and the user's
modules too while their text is unchanged (so a compiled function's caches survive a repeat).
Before each request:
- every user module whose source text (on disk, or the unsaved buffer) no longer hashes the same
  is dropped, with every user module that imports it, directly or not (found statically: a
  ``from helper import CONSTANT`` leaves no runtime trace to follow);
- global state user code may have changed is put back: the torch settings below, RNG seeds,
  cached device memory (and garbage is collected between requests, see main.py).
Some things cannot be undone in place; then the agent asks to be restarted (``RestartNeeded``)
and the server retries the run on a fresh process, saying why: a changed C extension, compile
settings that changed between runs, a profiler left running, memory above the cap.
"""

from __future__ import annotations

import ast
import hashlib
import os
import random
import sys
from dataclasses import dataclass, field

from . import loader
from .loader import Project


class RestartNeeded(Exception):
    pass


@dataclass
class LoadedModule:
    name: str
    path: str
    digest: str
    imports: set[str]


@dataclass
class Reloader:
    root: str | None = None  # the project the loaded modules belong to
    modules: dict[str, LoadedModule] = field(default_factory=dict)
    # Modules seen not to be users' code (torch's thousands): never looked at twice.
    not_user: set[str] = field(default_factory=set)
    torch_settings: dict | None = None
    compile_settings: dict | None = None

    # -- before a request
    def prepare(self, project: Project, torch, memory_cap_mb: float | None = None) -> list[str]:
        """Drops stale modules, restores global state; returns what it did, for the warnings."""
        notes = []
        if project.root != self.root:
            # Another project: its `utils.py` is not this one's. Start from a clean slate.
            loader.forget_user_modules(project)
            self.modules.clear()
            self.not_user.clear()  # another project's files may be user code now
            self.root = project.root
        stale = self._stale(project)
        if stale:
            for name in stale:
                sys.modules.pop(name, None)
                self.modules.pop(name, None)
            noun = "module" if len(stale) == 1 else "modules"
            notes.append(f"reloaded {len(stale)} changed {noun}: {', '.join(sorted(stale))}")
        if torch is not None:
            self._restore_torch(torch)
        random.seed(0)
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            numpy.random.seed(0)
        # The previous run's garbage was collected right after its answer went out (main.py),
        # off the path of this request.
        if memory_cap_mb:
            rss = _rss_mb()
            if rss is not None and rss > memory_cap_mb:
                raise RestartNeeded(
                    f"the agent used {rss:.0f} MB, above its {memory_cap_mb:.0f} MB cap"
                )
        return notes

    def _stale(self, project: Project) -> set[str]:
        changed = set()
        for name, loaded in self.modules.items():
            current = _digest_of(project, loaded.path)
            if current != loaded.digest:
                if loaded.path.endswith((".so", ".pyd")):
                    raise RestartNeeded(
                        f"the compiled extension {os.path.basename(loaded.path)} changed and "
                        "cannot be reloaded in place"
                    )
                changed.add(name)
        # Everything that imports a changed module, directly or through others.
        stale = set(changed)
        grew = True
        while grew:
            grew = False
            for name, loaded in self.modules.items():
                if name not in stale and loaded.imports & stale:
                    stale.add(name)
                    grew = True
        # A module that is gone from sys.modules (it failed to import) is simply imported anew.
        return stale

    def _restore_torch(self, torch) -> None:
        current = _torch_settings(torch)
        if self.torch_settings is None:
            self.torch_settings = current
            return
        for key, value in self.torch_settings.items():
            if current.get(key) != value:
                _set_torch_setting(torch, key, value)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        if _profiler_running(torch):
            raise RestartNeeded("user code left a torch profiler running")

    # -- after a request
    def record(self, project: Project) -> None:
        """Notes the user modules now loaded, with the hash of the text they were loaded from."""
        for name, module in list(sys.modules.items()):
            if name in self.modules or name in self.not_user:
                continue
            path = getattr(module, "__file__", None)
            if not path or not project.is_user_module_file(path):
                self.not_user.add(name)
                continue
            digest = _digest_of(project, path)
            if digest is None:
                continue
            self.modules[name] = LoadedModule(name, path, digest, _imports_of(project, name, path))

    def check_compile_settings(self, torch) -> None:
        """A change of torch.compile settings between runs invalidates what is compiled."""
        if "torch._dynamo" not in sys.modules:
            return
        current = {}
        for module in ("torch._dynamo.config", "torch._inductor.config"):
            config = sys.modules.get(module)
            get = getattr(config, "_get_dict", None)
            if get is None:
                return  # an older torch: nothing reliable to compare
            try:
                overrides = get(skip_default=True)
            except TypeError:
                return
            current.update({f"{module}.{k}": repr(v) for k, v in overrides.items()})
        previous, self.compile_settings = self.compile_settings, current
        if previous is None:
            return
        # torch itself sets some inductor options on first compile: a key appearing is not a
        # change. A value that differs, or an override that went away, is.
        changed = sorted(k for k, v in previous.items() if current.get(k) != v)
        if changed:
            raise RestartNeeded(
                f"torch.compile settings changed since the last run ({', '.join(changed[:4])}); "
                "a fresh process measures code compiled with the new ones"
            )


def _digest_of(project: Project, path: str) -> str | None:
    path = os.path.abspath(path)
    if path in project.files:
        return hashlib.sha256(project.files[path].encode("utf-8")).hexdigest()
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return "missing"


def _imports_of(project: Project, name: str, path: str) -> set[str]:
    """Module names (and their parent packages) a module's source imports, statically."""
    if path.endswith((".so", ".pyd")):
        return set()
    try:
        text = project.read(path)
        tree = ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return set()
    is_package = os.path.basename(path) == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = (
                    parts[: len(parts) - (node.level - 1)] if node.level - 1 <= len(parts) else []
                )
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module:
                found.add(module)
                found.update(f"{module}.{alias.name}" for alias in node.names)
    closed: set[str] = set()
    for item in found:
        parts = item.split(".")
        closed.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return closed


_SETTINGS = {
    "num_threads": lambda t: t.get_num_threads(),
    "default_dtype": lambda t: t.get_default_dtype(),
    "grad_enabled": lambda t: t.is_grad_enabled(),
    "deterministic": lambda t: t.are_deterministic_algorithms_enabled(),
    "matmul_precision": lambda t: t.get_float32_matmul_precision(),
    "cudnn_benchmark": lambda t: t.backends.cudnn.benchmark,
    "cudnn_deterministic": lambda t: t.backends.cudnn.deterministic,
    "cuda_matmul_tf32": lambda t: t.backends.cuda.matmul.allow_tf32,
    "anomaly": lambda t: t.is_anomaly_enabled(),
}


def _torch_settings(torch) -> dict:
    found = {}
    for key, read in _SETTINGS.items():
        try:
            found[key] = read(torch)
        except (AttributeError, RuntimeError):
            continue
    return found


def _set_torch_setting(torch, key: str, value) -> None:
    setters = {
        "num_threads": torch.set_num_threads,
        "default_dtype": torch.set_default_dtype,
        "grad_enabled": torch.set_grad_enabled,
        "deterministic": torch.use_deterministic_algorithms,
        "matmul_precision": torch.set_float32_matmul_precision,
        "cudnn_benchmark": lambda v: setattr(torch.backends.cudnn, "benchmark", v),
        "cudnn_deterministic": lambda v: setattr(torch.backends.cudnn, "deterministic", v),
        "cuda_matmul_tf32": lambda v: setattr(torch.backends.cuda.matmul, "allow_tf32", v),
        "anomaly": torch.autograd.set_detect_anomaly,
    }
    setters[key](value)


def _profiler_running(torch) -> bool:
    enabled = getattr(torch._C._autograd, "_profiler_enabled", None)
    return bool(enabled()) if callable(enabled) else False


def _rss_mb() -> float | None:
    try:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
