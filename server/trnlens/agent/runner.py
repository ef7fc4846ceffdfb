"""One profile request: import the user's code, build inputs, measure each variant, make results.

A request names one or more variants to run on the same inputs. Each variant is the function at
``path::qualname``, optionally replaced by ``source`` text (a generated fix: it is exec'd in a copy
of the module's globals and stands in for ``replaces``, default ``qualname``), optionally wrapped
in ``torch.compile`` (``compile: true``; ``backend="neuron"`` on Neuron).

The jobs around it have their own modules: the request's fields (request.py), how a variant is
called (calls.py), the result dict (resultdict.py), a comparison's snapshots, rounds and envelope
(comparison.py), the passes (measure.py). A variant goes through three steps here, each given the
``Variant`` that the step before filled in: ``_load`` (source, definition, module), ``_prepare``
(inputs, callable, mode, eval flags) and ``_measure``.
"""

from __future__ import annotations

import gc
import hashlib
import os
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import attribution, calls, errors, inputs, loader, request, sources, swaps
from .comparison import Snapshots, Timed, envelope, time_in_rounds
from .compilelog import CompileLog
from .events import ADDED_BACKWARD_LABEL
from .measure import Cancelled, Measurement, Measurer
from .notebook import live as live_notebook
from .notebook import places
from .notebook.cells import Joined
from .notebook.live import Live, LiveProject
from .protocol import Progress
from .reloader import Reloader
from .resultdict import base_result, machine_load_warning, new_run_id, record
from .xla.summary import xla_section

PROCESS_RELOADER = Reloader()

__all__ = ["Runner", "new_run_id"]

ProgressSink = Callable[[Progress], None]


@dataclass
class Variant:
    """One variant's run, filled in step by step (``_load``, ``_prepare``, ``_measure``)."""

    index: int
    spec: dict  # the request's variant: path, qualname, source, compile, module_swaps, label
    result: dict
    out_dir: str
    started: float  # perf_counter at its start: the accounting's variant_us
    path: str = ""  # absolute
    relpath: str = ""
    qualname: str = ""
    text: str = ""
    definition: sources.Definition | None = None
    module: types.ModuleType | None = None
    target: Any = None  # what the qualname names in the module
    made: inputs.Inputs | None = None
    inputs_source: str = ""  # "defaults" or "directive:<factory>": the snapshot's key
    call: Callable[..., Any] | None = None
    mode: str = "auto"
    trains: Any = None  # steps.Found: the training call the function makes, if any
    reachable: list[tuple[str, Any]] = field(default_factory=list)  # (name, nn.Module)
    notebook: Joined | None = None  # a notebook's cells, as joined for this run

    @property
    def where(self) -> tuple[str, int]:
        """The def line: where training mode's added backward counts."""
        assert self.definition is not None
        return self.relpath, self.definition.def_line


class Runner:
    def __init__(
        self,
        fields: dict,
        progress: ProgressSink,
        cancelled: Callable[[], bool],
        reloader: Reloader | None = None,
        lockstep: Any = None,
        live: Live | None = None,
    ):
        self.fields = fields
        # Inside a Jupyter kernel (the %trnlens magic): objects already built, nothing imported.
        self.live = live
        self.lockstep = lockstep  # multi-rank (distributed.Lockstep): ranks measure alike
        # One reloader per process: what this process has loaded is the process's state.
        self.reloader = reloader or PROCESS_RELOADER
        self._progress = progress
        self.cancelled = cancelled
        self.variant_index = 0
        self.variant_count = 1
        self.torch: Any = None
        self.snapshots = Snapshots(comparing=False)
        self.timed: list[Timed] = []  # the variants whose timing waits for the rounds
        self.replay: Callable[[], list[Any] | None] | None = None  # the baseline's first call
        self._swapped: list[tuple] = []  # module swaps of the running variant (swaps.py)

    def progress(
        self, phase: str, message: str = "", step: int | None = None, steps: int | None = None
    ) -> None:
        self._progress(
            Progress(None, phase, self.variant_index, message, self.variant_count, step, steps)
        )

    @property
    def comparing(self) -> bool:
        return self.snapshots.comparing

    def run(self) -> dict:
        req = request.parse(self.fields)
        self.req = req
        live = self.live
        if live is not None:
            project: loader.Project = LiveProject(req.root, live.cell_files)
        else:
            project = loader.Project(root=req.root, files=req.files)
            loader.materialize(req.root, req.sources, prune=True)
        self.variant_count = len(req.variants)
        self.progress("importing", "torch")
        started = time.perf_counter()
        torch = self.torch = _import_torch()
        torch_import_s = time.perf_counter() - started
        if torch_import_s > 0.05:
            # torch's own objects live as long as the process: move them out of the collector's
            # way, so the full collection between warm runs (main.py) scans only what runs made.
            gc.collect()
            gc.freeze()
        from . import backends

        backend = backends.select(req.backend, torch, dict(req.options), req.artifacts_dir)
        reload_notes: list[str] = []
        if live is None:  # a kernel's modules are the user's session: never dropped
            reload_notes = self.reloader.prepare(project, torch, req.options.get("memory_cap_mb"))
            loader.install(project)
        self.snapshots = Snapshots(comparing=len(req.variants) > 1)
        req.settings.defer_timing = self.comparing and req.settings.timing
        results = []
        modules: dict[str, types.ModuleType] = {}
        try:
            for index, spec in enumerate(req.variants):
                self.variant_index = index
                results.append(self._variant(index, spec, project, modules, backend))
            if self.timed:
                self.variant_index = 0
                self.progress("timing", f"up to {req.settings.repeats} interleaved rounds")
                time_in_rounds(self.timed, results, req.settings.repeats,
                               req.settings.timing_budget_s, self.cancelled)  # fmt: skip
        finally:
            # Also when a variant stopped the request (missing inputs, a bad directive): the
            # modules it imported stay loaded, and unrecorded they would never be reloaded when
            # their text changes (the next run would measure the old code).
            if live is None:
                self.reloader.record(project)
        if live is None:
            self.reloader.check_compile_settings(torch)  # may ask for a fresh process instead
        for note in reload_notes:
            results[0]["warnings"].append(f"warm agent: {note}")
        busy = machine_load_warning()
        if busy:
            for result in results:
                result["warnings"].append(busy)
        if torch_import_s > 0.05:
            results[0]["warnings"].append(f"import torch took {torch_import_s:.1f} s (cold agent)")
        if len(results) == 1:
            results[0].pop("_output", None)
            return results[0]
        return envelope(results, self.snapshots.notes, self.replay, torch)

    # -- one variant
    def _variant(
        self,
        index: int,
        spec: dict,
        project: loader.Project,
        modules: dict[str, types.ModuleType],
        backend: Any,
    ) -> dict:
        req = self.req
        run_id = new_run_id()
        out_dir = req.out_dir or os.path.join(req.artifacts_dir, run_id)
        os.makedirs(out_dir, exist_ok=True)
        result = base_result(run_id, spec, project, backend, req.mode, req.settings, req.context)
        v = Variant(index, spec, result, out_dir, started=time.perf_counter())
        try:
            self._load(v, project, modules)
            flags = self._prepare(v, project, backend)
            try:
                self._measure(v, project, backend)
            finally:
                for m, was in flags:
                    m.training = was
        except Cancelled:
            raise
        except errors.AgentError as exc:
            if exc.kind != "user_code":
                raise
            # The user's code failed: the run is still a result (the editor shows it on the
            # raising line, a comparison keeps the other variants).
            result["error"] = exc.to_json()
        finally:
            # What the backend noticed (during selection or profiling) belongs to this run.
            result["warnings"][:0] = backend.warnings
            backend.warnings.clear()
            swaps.undo(self._swapped)  # a model in a module global outlives the variant
            self._swapped = []
        if self.live is not None:
            live_notebook.to_notebook(result, self.live.cell_files)
        if v.notebook is not None:
            places.add_cells(result, v.relpath, v.notebook)
        return result

    def _load(
        self, v: Variant, project: loader.Project, modules: dict[str, types.ModuleType]
    ) -> None:
        """The variant's source text, its definition and its (imported) module and target."""
        v.path = os.path.abspath(os.path.join(project.root, v.spec["path"]))
        v.qualname = v.spec.get("qualname") or ""
        v.relpath = project.relpath(v.path)
        if self.live is not None:
            self._load_live(v, self.live)
            return
        try:
            v.text = project.read(v.path)
        except FileNotFoundError:
            raise errors.usage(f"no such file: {v.relpath}") from None
        except UnicodeDecodeError as exc:
            raise errors.usage(f"{v.relpath} is not UTF-8 text: {exc}") from None
        try:
            v.definition = sources.find_definition(v.text, v.qualname, v.relpath)
        except SyntaxError as exc:
            raise errors.AgentError("user_code", f"SyntaxError: {exc.msg}", type_="SyntaxError",
                                    path=v.relpath, line=exc.lineno) from None  # fmt: skip
        except sources.DefinitionNotFound as exc:
            raise errors.usage(str(exc)) from None
        v.result["function"].update(
            source_hash=sources.source_hash(v.text, v.definition),
            line=v.definition.def_line,
            end_line=v.definition.end_line,
        )
        if loader.is_notebook(v.path):
            # Lines in the result count in the joined cells; this map places them in cells.
            v.notebook = project.notebook(v.path)
            v.result["notebook"] = {"cells": v.notebook.to_map()}
        self.progress("importing", v.relpath)
        module = modules.get(v.path)
        if module is None:
            try:
                module = loader.import_file(project, v.path)
            except errors.AgentError:
                raise
            except (Exception, SystemExit) as exc:  # sys.exit() at import is the code's failure
                raise errors.from_user_code(exc, project.is_project_file, project.relpath) from None
            modules[v.path] = module
        v.module = module
        v.target = loader.resolve(module, v.qualname)

    def _load_live(self, v: Variant, live: Live) -> None:
        """A kernel's objects: the definition from the notebook's (or the cell's) text."""
        v.text, v.definition = live.text, live.definition
        v.module, v.target = live.module, live.target
        v.result["function"].update(
            source_hash=sources.source_hash(v.text, v.definition),
            line=v.definition.def_line,
            end_line=v.definition.end_line,
        )
        if live.notebook is not None:
            v.notebook = live.notebook
            v.result["notebook"] = {"cells": live.notebook.to_map()}

    def _prepare(self, v: Variant, project: loader.Project, backend: Any) -> list[tuple[Any, bool]]:
        """Inputs (from the comparison's snapshot), the callable, the mode and the modules'
        training flags; returns each reachable module's own flag, restored after the run."""
        torch = self.torch
        assert v.definition is not None and v.module is not None
        self.progress("building-inputs")
        calls.reseed(torch)
        made, v.inputs_source = self._inputs(v, project, backend)
        made = self.snapshots.start_from((v.path, v.inputs_source), made)
        inputs.move(made, backend.device, torch)
        v.made = made
        if v.spec.get("module_swaps"):
            self._swap(v)
        v.call = calls.make_callable(torch, v.target, v.definition, made, v.spec, v.module,
                                     v.result, backend, self.progress)  # fmt: skip
        v.mode, v.result["mode_reason"], v.trains = calls.choose_mode(
            self.req.mode, v.call, v.target, v.module, made, project, torch
        )
        v.result["mode"] = v.mode
        v.reachable = attribution.reachable_modules(
            torch, attribution.input_roots(made, v.call, torch)
        )
        flags = [(m, m.training) for _, m in v.reachable]
        if isinstance(made.instance, torch.nn.Module):
            made.instance.to(backend.device)
            if v.mode != "as-written":  # as written: the module stays in the mode it was built in
                made.instance.train(v.mode == "training")
        if v.mode == "inference" and v.reachable:
            self._eval(v, flags)
        return flags

    def _eval(self, v: Variant, flags: list[tuple[Any, bool]]) -> None:
        """Inference means eval: BatchNorm's batch statistics and running-stat updates and
        Dropout are training work, not what a deployed model dispatches."""
        for name, m in v.reachable:
            if "." not in name:
                m.eval()  # the roots' own eval(), for modules that override train()
        for _, m in v.reachable:
            m.training = False
        switched = sum(1 for _, was in flags if was)
        roots = sorted({name.split(".")[0] for name, _ in v.reachable})
        v.result["eval_modules"] = {
            "modules": len(v.reachable),
            "were_training": switched,
            "roots": roots,
            "message": (
                f"inference runs in eval(): {len(v.reachable)} nn.Modules reachable from "
                f"{', '.join(roots)} ({switched} of them in training mode) ran in eval() and "
                "got their own training flags back after the run"
            ),
        }

    def _measure(self, v: Variant, project: loader.Project, backend: Any) -> None:
        torch, settings, result = self.torch, self.req.settings, v.result
        assert v.made is not None and v.call is not None
        result["inputs"] = inputs.describe_inputs(v.made, v.inputs_source, torch)
        trains = v.trains
        if v.mode == "training" and trains is not None:
            raise errors.usage(
                f"training mode adds a backward after each call, but {v.qualname} already calls "
                f"{trains.what} at {trains.path}:{trains.line}: profile it with --mode as-written "
                "(mode auto picks it)",
                path=trains.path,
                line=trains.line,
            )
        compiled = bool(v.spec.get("compile")) or calls.is_compiled(v.call, torch)
        step = calls.make_step(v.call, v.made, v.mode, torch, project, v.where)
        measured_step, compile_log = step, None
        # On for every run: a compiled callee or a module-level torch.compile(model) compiles
        # during an eager run too (issue 21); a run where nothing compiled has no compile section.
        # (torch._dynamo is loaded anyway: is_compiled reads it, and torch.profiler imports
        # torch._inductor, which imports it.)
        if self.req.options.get("compile_log", True):  # compilelog.py; off only to measure it
            compile_log = CompileLog(torch, project.is_project_file, project.relpath,
                                     settings.warmup).start()  # fmt: skip
            measured_step = compile_log.wrap(step)
        recorder = None
        if backend.name == "xla":  # every call synchronised and counted (agent/xla/)
            from .xla.recorder import Recorder

            made = v.made
            recorder = Recorder(torch, backend, settings.warmup, project,
                                [made.instance, made.args, made.kwargs])  # fmt: skip
            measured_step = recorder.wrap(measured_step)
            if settings.lines:
                # The lines pass's mode keeps intermediate tensors alive, which become graph
                # outputs: a new graph, a recompilation (minutes on Neuron) that the step itself
                # never makes. Per-line figures come from the XLA sites step instead.
                settings.lines = False
                result["warnings"].append(
                    "xla: per-line figures are IR nodes and graphs (the xla section), not times: "
                    "the line-timing pass would change the graph and recompile it"
                )
        mode = v.mode
        context = lambda: calls.mode_context(torch, mode, backend.inference_mode)  # noqa: E731
        measurer = Measurer(torch, backend, context, settings,
                            self.progress, self.cancelled, named_modules=v.reachable,
                            compile_log=compile_log, lockstep=self.lockstep)  # fmt: skip
        if v.mode == "training":  # the backward it adds counts on the def line (events.py)
            measurer.extra_labels[ADDED_BACKWARD_LABEL] = v.where
        kept: dict[str, Any] = {}
        # The first call's output, from the snapshot's state and freshly seeded RNGs: identical
        # code gives identical outputs however many steps each variant's passes run after it.
        # Kept from the first warm-up step: no call runs only to capture it.
        measurer.keep_first_output = lambda out: kept.setdefault(
            "output", calls.cpu_copy(out, torch)
        )
        if self.comparing and v.index == 0 and not compiled:
            self.replay = self._replay(v, project, backend)
        try:
            calls.reseed(torch)
            m = measurer.run(measured_step, compiled=compiled, out_dir=v.out_dir, project=project)
        except (Cancelled, errors.AgentError):
            raise
        except (Exception, SystemExit) as exc:  # sys.exit() in the code is the code's failure
            names = {id(module): name for name, module in measurer.named_modules}
            failure = errors.from_user_code(
                exc, project.is_project_file, project.relpath, names
            )  # fmt: skip
            if v.mode == "inference" and trains is not None:
                failure.message += (
                    f" ({v.qualname} calls {trains.what} at {trains.path}:{trains.line}, which "
                    "inference mode cannot run: --mode as-written runs it as written)"
                )
            raise failure from None
        finally:
            if compile_log is not None:
                compile_log.stop()
        if compile_log is not None:
            reuse = (v.path, v.qualname, result["function"]["source_hash"], v.spec.get("source"),
                     bool(v.spec.get("compile")), id(v.target))  # fmt: skip
            found = compile_log.finish(reuse if compiled else None)
            if compiled or found["compiled_in_run"]:
                found["scope"] = "function" if compiled else "callee"
                result["compile"] = found
        if recorder is not None:
            self.progress("measuring", "XLA: fallbacks and forced executions, line by line")
            result["xla"] = xla_section(recorder, step, project, context, v.reachable,
                                        recorder.roots)  # fmt: skip
            # library findings read these files, as they do the CPU attribution's (rules)
            result.setdefault("library_files", result["xla"].pop("library_files", []))
        self._record(v, m, project)
        result["_output"] = kept.get("output")
        if settings.defer_timing:
            self.timed.append(Timed(v.index, measurer, m, step, list(self._swapped)))

    def _record(self, v: Variant, m: Measurement, project: loader.Project) -> None:
        v.result["accounting"] = {
            "steps_us": m.steps_us,
            "variant_us": (time.perf_counter() - v.started) * 1e6,
        }
        record(v.result, m, project)
        if v.mode == "training":
            for entry in v.result["lines"] or []:
                if (entry["path"], entry["line"]) == v.where:
                    entry["label"] = "backward added by training mode"

    def _replay(
        self, v: Variant, project: loader.Project, backend: Any
    ) -> Callable[[], list[Any] | None]:
        """The baseline's first call made again from a fresh copy of the snapshot, with the same
        seeds (comparison.outputs_note): the one call a comparison adds."""
        torch, mode, made = self.torch, v.mode, v.made
        assert made is not None and v.definition is not None and v.module is not None
        definition, module = v.definition, v.module
        key, label = (v.path, v.inputs_source), dict(v.result["variant"])

        def replay() -> list[Any] | None:
            again = self.snapshots.start_from(key, made)
            if again is made:  # no copy to start from
                return None
            inputs.move(again, backend.device, torch)
            if isinstance(again.instance, torch.nn.Module):
                again.instance.to(backend.device)
                if mode != "as-written":
                    again.instance.train(mode == "training")
            call = calls.make_callable(torch, v.target, definition, again, v.spec, module,
                                       {"variant": label}, backend, self.progress)  # fmt: skip
            step = calls.make_step(call, again, mode, torch, project, v.where)
            calls.reseed(torch)
            with calls.mode_context(torch, mode, backend.inference_mode):
                return calls.cpu_copy(step(), torch)

        return replay

    def _inputs(
        self, v: Variant, project: loader.Project, backend: Any
    ) -> tuple[inputs.Inputs, str]:
        """The variant's inputs and where they came from (the snapshot's key)."""
        definition = v.definition
        assert definition is not None
        if self.live is not None:
            return self.live.made, "live"  # what the notebook already built
        directives = sources.read_directives(v.text, definition)
        if "inputs" not in directives and definition.kind == "method":
            cls_name = definition.qualname.rsplit(".", 1)[0]
            cls_def = sources.find_definition(v.text, cls_name, v.relpath)
            directives = sources.read_directives(v.text, cls_def)
        factory = self.req.inputs or directives.get("inputs")
        if factory:
            value = inputs.call_factory(v.module, factory, backend.device, v.relpath,
                                        project.is_project_file, project.relpath)  # fmt: skip
            return inputs.unpack_factory_result(value, definition, factory), f"directive:{factory}"
        if definition.kind == "function" and inputs.defaults_suffice(v.target):
            return inputs.Inputs((), {}), "defaults"
        raise errors.usage(
            inputs.missing_inputs_message(definition, v.relpath),
            type_="InputsMissing",
            path=v.relpath,
            line=definition.def_line,
        )

    def _swap(self, v: Variant) -> None:
        """Library methods swapped for their fixes on this run's instances (swaps.py)."""
        torch, made, result, swapped = self.torch, v.made, v.result, v.spec["module_swaps"]
        assert made is not None
        held = [x for x in vars(v.module).values() if isinstance(x, torch.nn.Module)]
        roots = [made.instance, made.args, made.kwargs, *held]
        self._swapped = swaps.apply(swapped, roots, torch, result["variant"]["label"])
        text = "\n".join(str(s.get("source") or s.get("kind")) for s in swapped)
        result["variant"]["source_hash"] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
        result["variant"]["swaps"] = [
            {"type_path": s.get("type_path"), "method": s.get("method")} for s in swapped
        ]
        result["variant"]["swapped_instances"] = swaps.count(self._swapped)


def _import_torch() -> Any:
    try:
        import torch
    except (ImportError, MemoryError) as exc:
        limit = os.environ.get("TRNLENS_MEMORY_LIMIT_MB")
        if limit and (isinstance(exc, MemoryError) or "failed to map" in str(exc)):
            raise errors.environment(
                f"the agent's memory limit (TRNLENS_MEMORY_LIMIT_MB={limit}) is too small "
                f"to import torch ({exc}): raise it"
            ) from None
        raise errors.environment(
            f"torch cannot be imported by {sys.executable} ({exc}): install it for that "
            "interpreter (pip install torch; on Trainium, torch-neuronx brings its own), or "
            "point trnlens at the interpreter that has it"
        ) from None
    return torch
