"""Fixes that reach library code without touching it: module swaps, measured and written.

A library finding of a run (``rules.py``) whose rule has a proven fix and whose code is a method
of a module class that ran carries a ``module-swap`` fix. Two uses:

- :func:`swap_variants`: ``trnlens compare --fix PATH::QUALNAME`` on a project function whose
  latest run found fixable library code measures the function as it is, with each swap (the
  agent sets the fixed method on every instance of that class in the run's module tree, see
  ``agent/swaps.py``), and compiled; outputs compared like every fix.
- :func:`helper`: the quick fix writes the swap into the user's code as a small, readable helper
  applied where the model is built; never into site-packages.

The fixed method is re-derived from the library file as it is now (not taken from the stored
run), so a library upgraded since the run is never patched with stale code. A remote run's
library files are on its host: there the text is the one its agent sent for the run (the
local cache, ``texts.py``), and the measured comparison of outputs is what checks it still fits.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable

from trnlens.analysis import Finding
from trnlens.fixvariants import NoFix
from trnlens.libraries import texts
from trnlens.libraries.rules import analysed_file


def latest_function_run(store, path: str, qualname: str) -> dict | None:
    """The latest stored run of the function as written (not a fixed or compiled variant)."""
    for run in store.runs(path, qualname, limit=10):
        if (run.get("variant") or {}).get("kind", "function") == "function":
            return run
    return None


def current_fix(entry: dict, run: dict | None = None) -> Finding | None:
    """The library finding ``entry`` (of ``run``) as the library file reads now, with its fix;
    None when the file changed so that the finding or its fix is gone."""
    fix = entry.get("fix") or {}
    if fix.get("kind") != "module-swap":
        return None
    if run is not None and texts.is_remote(run):
        analysed = analysed_file(str(entry.get("path")), texts.reader(run))
    else:
        analysed = analysed_file(str(entry.get("path")))
    if analysed is None:
        return None
    for finding in analysed.findings:
        if (
            finding.code == entry.get("code")
            and finding.qualname == entry.get("qualname")
            and finding.variant_source
        ):
            return finding
    return None


def swaps(run: dict) -> list[tuple[dict, dict]]:
    """(library finding, swap for the agent) for each fixable library finding of ``run``."""
    found, seen = [], set()
    for entry in run.get("library_findings") or []:
        finding = current_fix(entry, run)
        if finding is None:
            continue
        swap = {
            "type_path": entry["fix"]["type_path"],
            "method": entry["fix"]["method"],
            "source": finding.variant_source,
        }
        key = (swap["type_path"], swap["method"], swap["source"])
        if key not in seen:
            seen.add(key)
            found.append((entry, swap))
    return found


def swap_variants(path: str, qualname: str, run: dict | None) -> list[dict]:
    """``[original, original with each swap, compiled original]``; raises NoFix."""
    found = swaps(run) if run else []
    if not found:
        raise NoFix(f"the analysis has no fix for {qualname}")
    variants: list[dict] = [{"path": path, "qualname": qualname, "label": qualname}]
    for entry, swap in found:
        owner = entry.get("owner") or entry.get("qualname")
        variants.append(
            {
                "path": path,
                "qualname": qualname,
                "module_swaps": [swap],
                "label": f"{qualname} (fixed: {entry['code']} in {owner})",
            }
        )
    variants.append(
        {"path": path, "qualname": qualname, "compile": True, "label": f"{qualname} (compiled)"}
    )
    return variants


# -- the quick fix's helper -------------------------------------------------------------------
def helper_name(entry: dict) -> str:
    owner = str(entry.get("owner") or "module").rsplit(".", 1)[-1]
    return f"use_fused_{_snake(owner)}"


def helper(entry: dict, defined: Iterable[str], imports_torch: bool) -> tuple[str, str]:
    """The helper's text as (imports, functions): the fixed method (as the run's library
    finding carries it), and a loop setting it on every instance of the exact class in a model.
    ``defined``: the names the user's module binds at top level (the fixed method's other free
    names are imported from the library's module)."""
    fix = entry["fix"]
    type_path, method = str(fix["type_path"]), str(fix["method"])
    home, _, cls = type_path.rpartition(".")
    source = str(fix.get("source") or "")
    free = sorted(_free_names(source, method) - set(defined) - {cls})
    needs_torch = "torch" in free
    from_library = [name for name in free if name != "torch"]
    library = entry.get("library") or {}
    version = f" {library.get('version')}" if library.get("version") else ""
    name = helper_name(entry)
    fixed_name = f"_fused_{_snake(cls)}_{method}"
    body = source.replace(f"def {method}(", f"def {fixed_name}(", 1)
    imports = []
    if needs_torch and not imports_torch:
        imports.append("import torch")
    imports.append(f"from {home} import {', '.join([cls, *from_library])}")
    what = f"{library.get('name', 'the library')}{version}'s {cls}.{method}"
    lines = [
        f"# trnlens {entry['code']}: {what} with its fix",
        f"# ({fix.get('message') or 'fused'}; the same outputs). The library's file is untouched:",
        f"# {name}() sets this {method} on each {cls} of a model.",
        body.rstrip("\n"),
        "",
        "",
        f"def {name}(model):",
        f'    """Every {cls} in ``model`` runs the fused {method} above; returns the model."""',
        "    import types",
        "",
        "    for module in model.modules():",
        f"        if type(module) is {cls}:",
        f"            module.{method} = types.MethodType({fixed_name}, module)",
        "    return model",
    ]
    return "\n".join(imports) + "\n", "\n".join(lines) + "\n"


def _free_names(source: str, method: str) -> set[str]:
    """Names the function reads that it does not bind, other than builtins."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    defs = (n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
    func = next(defs, None)
    if func is None:
        return set()
    bound = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
    loaded = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loaded.add(node.id)
            else:
                bound.add(node.id)
    return {n for n in loaded - bound if not hasattr(builtins, n)}


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and (not name[i - 1].isupper() or _next_lower(name, i)):
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def _next_lower(name: str, i: int) -> bool:
    return i + 1 < len(name) and name[i + 1].islower()
