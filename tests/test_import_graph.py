"""The server's import graph has no cycle, counting every import (module level, function-local and
``TYPE_CHECKING`` alike), and no two first-level folders (lsp, report, analysis, ...) import each
other, directly or through others. A cycle is how a feature reaches back to the server object."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "server"
PACKAGE = "trnlens"


def modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / PACKAGE).rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its text."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: list[str] = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            targets += [base] + [f"{base}.{alias.name}" for alias in node.names]
    found = set()
    for target in targets:
        while target and target not in known:  # `from a.b import name`: the module a.b
            target = target.rpartition(".")[0]
        # a package's own __init__ is no import of its submodules' (importing a.b runs a)
        if target and target != name and not name.startswith(target + "."):
            found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def folder(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_the_graph_sees_imports_of_every_kind():
    edges = graph()
    assert "trnlens.lsp.server" in edges["trnlens.cli.serve"]  # imported inside a function
    assert "trnlens.lsp.context" in edges["trnlens.lsp.runs"]
    assert cycle({"a": {"b"}, "b": {"a"}}) is not None  # the check can fail


def test_no_module_imports_its_way_back_to_itself():
    found = cycle(graph())
    assert found is None, " -> ".join(found or [])


def test_no_two_folders_import_each_other():
    folders: dict[str, set[str]] = {}
    for module, targets in graph().items():
        for target in targets:
            if folder(module) != folder(target):
                folders.setdefault(folder(module), set()).add(folder(target))
    found = cycle(folders)
    assert found is None, " -> ".join(found or [])


def test_the_agent_imports_trnlens_only_relatively():
    """The agent ships alone, as ``trnlens_agent`` (targets/bundle.py): an absolute ``trnlens.``
    import in it works where trnlens is installed, and fails on a host that has the bundle
    alone (a remote target)."""
    absolute = []
    for path in sorted((SRC / PACKAGE / "agent").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            absolute += [
                f"{path.relative_to(SRC)}:{node.lineno} imports {name}"
                for name in names
                if name == PACKAGE or name.startswith(PACKAGE + ".")
            ]
    assert absolute == []
