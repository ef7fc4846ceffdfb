"""The library code a run executed, where the user looks: the calling line and the library file.

From a placed run's ``frames``, ``modules`` and ``library_findings`` (libraries/rules.py):

- diagnostics: each library finding sits on the project line that called it (source
  ``trnlens (library)``, the measured cost in the message), and on its own line when the library
  file is open; the quick fix writes the module swap into the user's code as a readable helper
  applied where the model is built (libraries/swap.py), never into the library;
- hover of a calling line: its top library lines and modules, each with its share;
- inlay hints in a library file opened after a run: each measured line's share, time and
  dispatches, from every run placed on an open document that executed it (for a remote run, in
  the local copy of the host's file, ``library_copies``: libraries/texts.py).

Shares are of the run's attributed frame time (the frames plus the rest), the same figure for
lines and modules. Nothing here reads a file: what a library file holds comes from its document.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from lsprotocol import types

from trnlens.libraries import swap
from trnlens.lsp import format, markdown, run_findings
from trnlens.lsp.command_ids import MEASURE_FIX  # lsp/commands.py: falls back to the run's swaps
from trnlens.lsp.documents import Placement, ProfiledDocument
from trnlens.lsp.hints import STALE, Labelled, dropping, fitted
from trnlens.lsp.run_findings import ast_position, line_range

SOURCE = "trnlens (library)"
MAX_LINES = 3  # a hover's glance: the rest is in the run report
MAX_MODULES = 3


def attributed_us(data: dict) -> float:
    """The run's attributed frame time per step: what every share here is a share of."""
    frames = data.get("frames") or []
    rest = data.get("frames_rest") or {}
    total = sum(f.get("self_time_per_step_us") or 0 for f in frames)
    return total + (rest.get("self_time_per_step_us") or 0)


def _share(time_us: float, total: float) -> str:
    return f"{100 * time_us / total:.0f}%" if total > 0 else "?"


def _placements(doc: ProfiledDocument) -> Iterator[Placement]:
    for placement in doc.placements.values():
        if not placement.result.error:
            yield placement


# -- the calling line ------------------------------------------------------------------------
def diagnostics(
    doc: ProfiledDocument, others: Iterable[ProfiledDocument]
) -> list[types.Diagnostic]:
    """On a project document: each library finding on its calling lines. On a library file:
    each finding of a run placed on any open document at its own line."""
    found = []
    for placement in _placements(doc):
        data = placement.result.data
        roots = [m.get("type") for m in data.get("modules") or [] if "." not in m.get("name", "")]
        for entry in data.get("library_findings") or []:
            for caller in entry.get("callers") or []:
                if caller.get("path") != doc.relpath or not caller.get("line"):
                    continue
                line = placement.now(caller["line"] - 1)
                if line is None:
                    continue
                where = f"{entry['path']}:{entry['line']}"
                copy = (data.get("library_copies") or {}).get(entry["path"])
                if copy:  # a remote host's file: where its text can be read here
                    where += f" (on {data.get('target')}; its copy: {copy})"
                message = (
                    f"{entry['message']} (measured, {placement.result.qualname}, "
                    f"{format.age(data['created_at'])})\nin {where}: {entry.get('static_message')}"
                    + _framework_note(entry)
                )
                if doc.is_stale(placement):
                    message += " · stale: the function changed since"
                related = [_library_location(entry)]
                found.append(
                    _diagnostic(
                        doc.text, line, message, entry, roots, placement.result.qualname, related
                    )
                )
    if not doc.read_only:
        return found
    # A library file: each finding once (the latest run's), never an edit here: the fix is the
    # swap helper on the calling line, in the project.
    path = _resolved(doc.path)
    digest = None
    by_finding: dict[tuple, types.Diagnostic] = {}
    for other in others:
        for placement in _placements(other):
            for entry in placement.result.data.get("library_findings") or []:
                if not _shows(placement, str(entry.get("path")), path):
                    continue
                callers = entry.get("callers") or []
                where = ", ".join(f"{c['path']}:{c['line']}" for c in callers)
                message = f"{entry['message']} (measured by a run of {placement.result.identity}"
                message += f", called from {where})" if where else ")"
                if entry.get("fix") and callers:
                    message += (
                        f"\nfix it in the project, not here: the quick fix on the calling line "
                        f"adds {swap.helper_name(entry)}(), which swaps "
                        f"{entry.get('owner')}.{entry['fix']['method']} where the model is built"
                    )
                message += _framework_note(entry)
                digest = digest or _digest(doc.text)
                if _changed(placement, str(entry.get("path")), digest):
                    message += " · stale: the file changed since the run read it"
                related = [
                    r for c in callers if (r := _caller_location(other, placement, c)) is not None
                ]
                key = (entry.get("code"), entry.get("line"))
                by_finding[key] = _diagnostic(
                    doc.text, int(entry["line"]) - 1, message, entry, [], None,
                    related,
                )  # fmt: skip
    return found + list(by_finding.values())


def _library_location(entry: dict) -> types.DiagnosticRelatedInformation:
    """The library line of a finding, for the calling line's diagnostic (editors make it a
    link: the way from the project to the naive code without a Python extension)."""
    line = max(0, int(entry.get("line") or 1) - 1)
    where = types.Range(types.Position(line, 0), types.Position(line, 0))
    library = entry.get("library") or {}
    name = " ".join(str(v) for v in (library.get("name"), library.get("version")) if v)
    what = f"{entry.get('qualname')}" + (f" ({name})" if name else "")
    return types.DiagnosticRelatedInformation(
        types.Location(Path(str(entry.get("path"))).as_uri(), where),
        f"the pattern, in {what}",
    )


def _caller_location(
    doc: ProfiledDocument, placement: Placement, caller: dict
) -> types.DiagnosticRelatedInformation | None:
    """A project line that called the library line (where its fix goes)."""
    if not caller.get("path") or not caller.get("line"):
        return None
    line: int | None = int(caller["line"]) - 1
    if caller["path"] == doc.relpath:
        line = placement.now(int(caller["line"]) - 1)  # followed through the edits since
    if line is None:
        return None
    uri = doc.uri if caller["path"] == doc.relpath else (doc.root / caller["path"]).as_uri()
    where = types.Range(types.Position(line, 0), types.Position(line, 0))
    return types.DiagnosticRelatedInformation(
        types.Location(uri, where), f"called from here ({placement.result.qualname})"
    )


def _diagnostic(
    text: str,
    line: int,
    message: str,
    entry: dict,
    roots: list,
    qualname: str | None = None,
    related: list[types.DiagnosticRelatedInformation] | None = None,
) -> types.Diagnostic:
    fixable = entry.get("fix") and qualname
    return types.Diagnostic(
        range=line_range(text, line),
        message=message,
        severity=severity(entry),
        source=SOURCE,
        code=entry.get("code"),
        related_information=related or None,
        data={"entry": entry, "roots": roots, "qualname": qualname} if fixable else None,
    )


def severity(entry: dict) -> types.DiagnosticSeverity:
    """A Warning for what the project can act on; Information for a finding under 1% of the
    run's time (run_findings.WARNING_SHARE) or in torch's own code that nothing in the project
    switches off (:func:`framework_action`)."""
    if in_torch(entry) and framework_action(entry) is None:
        return types.DiagnosticSeverity.Information
    return run_findings.severity(entry.get("share"))


def in_torch(entry: dict) -> bool:
    """The finding is in the framework's own code (torch's optimizers, autograd, nn...)."""
    if (entry.get("library") or {}).get("name") == "torch":
        return True
    return bool(re.search(r"[/\\](site|dist)-packages[/\\]torch[/\\]", str(entry.get("path"))))


# torch/optim/<file>.py -> (the optimizer classes there, whether torch has a fused kernel)
_OPTIMIZERS = {
    "adam": ("Adam (or AdamW)", True), "sgd": ("SGD", True), "adagrad": ("Adagrad", True),
    "adadelta": ("Adadelta", False), "adamax": ("Adamax", False), "asgd": ("ASGD", False),
    "nadam": ("NAdam", False), "radam": ("RAdam", False), "rmsprop": ("RMSprop", False),
    "rprop": ("Rprop", False),
}  # fmt: skip


def framework_action(entry: dict) -> str | None:
    """What the project can do about a finding in torch's own code: an optimizer's
    per-parameter loop (``_single_tensor_adam``) or foreach loop (``_multi_tensor_adam``) is
    left for another implementation by an argument where the optimizer is built; None for the
    rest (autograd, a fused kernel, an optimizer without one): nothing to pass."""
    found = re.search(r"[/\\]torch[/\\]optim[/\\](\w+)\.py$", str(entry.get("path")))
    if found is None or found.group(1) not in _OPTIMIZERS:
        return None
    name, fused = _OPTIMIZERS[found.group(1)]
    function = str(entry.get("qualname") or "").rsplit(".", 1)[-1]
    if function.startswith("_single_tensor_"):
        flag = "fused=True (or foreach=True)" if fused else "foreach=True"
    elif function.startswith("_multi_tensor_") and fused:
        flag = "fused=True"
    else:
        return None
    return (
        f"pass {flag} to torch.optim.{name} where the optimizer is built: torch then steps "
        f"the parameters in {'one fused kernel' if 'fused' in flag else 'a few foreach kernels'} "
        f"a group instead of running {function}"
    )


def _framework_note(entry: dict) -> str:
    """What a finding in torch's own code means for the project ("" elsewhere)."""
    if not in_torch(entry):
        return ""
    action = framework_action(entry)
    if action:
        return f"\nin torch's own code; from the project: {action}"
    return "\nin torch's own code: nothing in the project changes it (Information)"


def hover_lines(placement: Placement, measured_line: int, relpath: str) -> list[str]:
    """Markdown for the hover of a project line that called library code (1-based
    ``measured_line``, as the run numbered it): its top library lines and modules."""
    data = placement.result.data
    total = attributed_us(data)

    def called_here(callers: list[dict]) -> float:
        return sum(
            c.get("dispatches_per_step") or 0
            for c in callers
            if c.get("path") == relpath and c.get("line") == measured_line
        )

    lines = []
    for frame in data.get("frames") or []:
        if frame.get("project"):
            continue
        here = called_here(frame.get("callers") or [])
        if here and frame.get("dispatches_per_step"):
            part = here / frame["dispatches_per_step"]
            lines.append((frame, here, (frame.get("self_time_per_step_us") or 0) * part))
    lines.sort(key=lambda x: -x[2])
    modules = [
        m
        for m in data.get("modules") or []
        if (m.get("caller") or {}).get("path") == relpath
        and (m.get("caller") or {}).get("line") == measured_line
    ]
    modules.sort(key=lambda m: -(m.get("total_time_per_step_us") or 0))
    if not lines and not modules:
        return []
    heading = (
        f"**library code called here** (share of the run's attributed time, {_clock(placement)})"
    )
    out = ["", heading]
    if lines:
        out += ["", "| library line | share | time | dispatches |", "|---|---:|---:|---:|"]
        for frame, here, time_us in lines[:MAX_LINES]:
            library = frame.get("library") or {}
            name = " ".join(str(v) for v in (library.get("name"), library.get("version")) if v)
            where = f"{Path(str(frame['path'])).name}:{frame['line']} {frame.get('function', '')}"
            # a link that opens the library file at that line (editors follow file URIs with
            # #L<line>): the way there without a Python extension's Go to Definition
            link = f"{_file_link(str(frame['path']), frame['line'])}"
            label = f"[{markdown.code(where)}]({link})" + (
                f" ({markdown.text(name)})" if name else ""
            )
            out.append(
                f"| {label} | {_share(time_us, total)} | {format.duration(time_us)} | {here:g} |"
            )
        if len(lines) > MAX_LINES:
            out.append(f"| … {len(lines) - MAX_LINES} more | | | |")
    if modules:
        out += ["", "| module | type | calls | share (total) |", "|---|---|---:|---:|"]
        for module in modules[:MAX_MODULES]:
            time_us = module.get("total_time_per_step_us") or 0
            out.append(
                f"| {markdown.code(module.get('name') or '(root)')} "
                f"| {markdown.text(module.get('type'))} "
                f"| {module.get('calls_per_step') or 0:g} | {_share(time_us, total)} |"
            )
        if len(modules) > MAX_MODULES:
            out.append(f"| … {len(modules) - MAX_MODULES} more | | | |")
    for entry in data.get("library_findings") or []:
        if called_here(entry.get("callers") or []):
            out += ["", f"⚠ {markdown.text(entry['message'])}"]
    return out


def _file_link(path: str, line: object) -> str:
    """``file:///…/modeling_llama.py#L66``: only for an absolute path (a remote run's library
    path is the host's, and not here)."""
    if not Path(path).is_absolute():
        return ""
    return f"{Path(path).as_uri()}#L{line}"


def _clock(placement: Placement) -> str:
    return markdown.text(placement.result.device_label)


# -- a library file ----------------------------------------------------------------------------
def inlay_hints(
    doc: ProfiledDocument, others: Iterable[ProfiledDocument], range_: types.Range
) -> list[types.InlayHint]:
    return fitted(labelled(doc, others, range_))


def labelled(
    doc: ProfiledDocument, others: Iterable[ProfiledDocument], range_: types.Range
) -> list[Labelled]:
    """Hints on the lines of a library file that runs placed on open documents executed."""
    path = _resolved(doc.path)
    text_lines = doc.text.splitlines()
    by_line: dict[int, tuple[dict, Placement, float]] = {}
    for other in others:
        for placement in _placements(other):
            total = attributed_us(placement.result.data)
            for frame in placement.result.data.get("frames") or []:
                if frame.get("project") or not _shows(placement, str(frame.get("path")), path):
                    continue
                line = int(frame.get("line") or 0) - 1
                if 0 <= line < len(text_lines) and range_.start.line <= line <= range_.end.line:
                    by_line[line] = (frame, placement, total)  # the latest placement wins
    hints = []
    digest = _digest(doc.text)
    for line, (frame, placement, total) in sorted(by_line.items()):
        time_us = frame.get("self_time_per_step_us") or 0
        parts = [_share(time_us, total), format.duration(time_us)]
        if frame.get("dispatches_per_step"):
            parts.append(format.count(frame["dispatches_per_step"], "dispatch"))
        if frame.get("backward_dispatches_per_step"):  # schema 4: its ops' backward, a part
            parts.extend(
                format.backward_share(time_us, frame.get("backward_self_time_per_step_us") or 0)
            )
        # the file changed since the run read it: lines may have moved
        stale = STALE if _changed(placement, str(frame.get("path")), digest) else ""
        callers = ", ".join(f"{c['path']}:{c['line']}" for c in frame.get("callers") or [])
        labels = dropping(parts, 2, stale)  # share and time kept (hints.fitted)
        hint = types.InlayHint(
            position=types.Position(line, len(text_lines[line].encode("utf-16-le")) // 2),
            label=labels[0],
            padding_left=True,
            tooltip=f"measured by run {placement.result.run_id} of "
            f"{placement.result.identity}" + (f", called from {callers}" if callers else ""),
        )
        hints.append(Labelled(hint, labels))
    return hints


def _shows(placement: Placement, run_path: str, doc_path: str) -> bool:
    """The open document is the run's library file ``run_path``: the file itself (a local run),
    or the local copy of a remote host's file its agent sent (``library_copies``)."""
    if _resolved(Path(run_path)) == doc_path:
        return True
    copy = (placement.result.data.get("library_copies") or {}).get(run_path)
    return isinstance(copy, str) and _resolved(Path(copy)) == doc_path


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _changed(placement: Placement, path: str, digest: str) -> bool:
    """The library file at ``path`` differs from what the run's rules read (libraries/rules.py
    records each file's sha256); unknown (an older run) counts as unchanged."""
    recorded = (placement.result.data.get("library_digests") or {}).get(path)
    return bool(recorded) and recorded != digest


# -- the quick fix ---------------------------------------------------------------------------
def code_actions(doc: ProfiledDocument, params: types.CodeActionParams) -> list[types.CodeAction]:
    actions = []
    for diagnostic in params.context.diagnostics:
        if diagnostic.source != SOURCE or not isinstance(diagnostic.data, dict):
            continue
        entry, roots = diagnostic.data.get("entry"), diagnostic.data.get("roots") or []
        if not isinstance(entry, dict) or not entry.get("fix"):
            continue
        qualname = diagnostic.data.get("qualname")
        if isinstance(qualname, str):  # compare --fix's module swap, from the editor
            title = f"Measure the swap: {qualname} vs {entry.get('owner')} swapped vs torch.compile"
            arguments = {"uri": doc.uri, "qualname": qualname, "code": entry.get("code")}
            actions.append(
                types.CodeAction(
                    title=f"{title} (trnlens)",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    command=types.Command(title=title, command=MEASURE_FIX, arguments=[arguments]),
                )
            )
        edits = swap_edits(doc.text, entry, roots)
        if edits is None:
            continue
        actions.append(
            types.CodeAction(
                title=f"Swap {entry.get('owner')}.{entry['fix']['method']} for its fused form "
                f"where the model is built ({entry['code']}, measured)",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                edit=types.WorkspaceEdit(changes={doc.uri: edits}),
            )
        )
    return actions


def swap_edits(text: str, entry: dict, roots: list[str]) -> list[types.TextEdit] | None:
    """The helper inserted after the imports, and the one call that builds the model wrapped
    in it; None when the model is not built in this document exactly once (advice only)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    name = swap.helper_name(entry)
    if any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body):
        return None  # already applied
    builds = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _builds(n, roots)]
    if len(builds) != 1:
        return None
    call = builds[0]
    defined = _top_level_names(tree)
    imports_torch = "torch" in defined
    imports, helper = swap.helper(entry, defined, imports_torch)
    lines = text.splitlines()
    after = max(
        (n.end_lineno or n.lineno for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)),
        default=0,
    )
    insert = types.Position(after, 0)
    start = ast_position(lines, call.lineno, call.col_offset)
    end = ast_position(lines, call.end_lineno or call.lineno, call.end_col_offset or 0)
    return [
        types.TextEdit(types.Range(insert, insert), f"{imports}\n\n{helper}"),
        types.TextEdit(types.Range(start, start), f"{name}("),
        types.TextEdit(types.Range(end, end), ")"),
    ]


def _builds(call: ast.Call, roots: list[str]) -> bool:
    """``LlamaForCausalLM(config)``, ``LlamaForCausalLM.from_pretrained(...)`` or
    ``AutoModel*.from_*(...)``: a call that builds one of the run's root modules."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in roots
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        owner = func.value.id
        if func.attr.startswith("from_"):
            return owner in roots or owner.startswith("AutoModel")
    return False


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _resolved_text(path: str) -> str:
    try:
        return str(Path(path).resolve())
    except OSError:
        return path


def _resolved(path: Path) -> str:
    """A library path as the run and the editor may spell it differently (symlinked venvs)."""
    return _resolved_text(str(path))
