"""One profile request: import the user's code, build inputs, measure each variant, make results.

A request names one or more variants to run on the same inputs. Each variant is the function at
``path::qualname``, optionally replaced by ``source`` text (a generated fix: it is exec'd in a copy
of the module's globals and stands in for ``replaces``, default ``qualname``), optionally wrapped
in ``torch.compile`` (``compile: true``; ``backend="neuron"`` on Neuron).

A comparison (two variants or more) must compare like with like: every variant starts from a deep
copy of one snapshot of the inputs (modules, optimizers and tensors copied together) with the RNGs
reseeded, and its output is its first call's, so identical code gives identical outputs however
many steps each variant's passes run. The baseline's first call is made once more from a fresh
copy: when it disagrees with itself its outputs depend on state outside the inputs, and the
comparison says "outputs not comparable" instead of a max |diff|. The variants' timing calls are
interleaved in rounds (rounds.py).
"""

from __future__ import annotations

import copy
import datetime as dt
import gc
import os
import socket
import sys
import time
import types
import uuid
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from typing import Any

from . import attribution, errors, inputs, loader, rounds, sources, steps, swaps
from .compilelog import CompileLog
from .events import ADDED_BACKWARD_LABEL
from .measure import Cancelled, Measurer, Settings, timing_figures
from .protocol import MODES, RUN_DEFAULTS, SCHEMA_VERSION
from .reloader import Reloader

PROCESS_RELOADER = Reloader()

DEFAULTS = RUN_DEFAULTS


def new_run_id() -> str:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{now}-{uuid.uuid4().hex[:8]}"


class Runner:
    def __init__(
        self,
        request: dict,
        progress: Callable[..., None],
        cancelled: Callable[[], bool],
        reloader: Reloader | None = None,
        lockstep=None,
    ):
        self.request = request
        self.lockstep = lockstep  # multi-rank (distributed.Lockstep): ranks measure alike
        # One reloader per process: what this process has loaded is the process's state.
        self.reloader = reloader or PROCESS_RELOADER
        self._progress = progress
        self.cancelled = cancelled
        self.variant_index = 0
        self.torch = None
        # A comparison starts every variant from one snapshot of its inputs (deep copies of the
        # first build: modules, optimizers, tensors), keyed by (file, inputs source).
        self.snapshots: dict[tuple, Any] = {}
        self.state_notes: list[str] = []
        self.timed: list[tuple] = []  # (index, measurer, measurement, step) for the rounds
        self.replay: Callable[[], Any] | None = None  # the baseline's first call, again
        self.comparing = False
        self._swapped: list[tuple] = []  # module swaps of the running variant (swaps.py)

    def progress(self, phase: str, message: str = "") -> None:
        self._progress(phase=phase, variant=self.variant_index, message=message)

    # -- request validation (before torch is even imported: usage errors answer fast)
    def _settings(self) -> tuple[Settings, str, str]:
        r = {**DEFAULTS, **{k: v for k, v in self.request.items() if v is not None}}
        mode = r["mode"]
        if mode not in MODES:
            raise errors.usage(
                f"unknown mode {mode!r}: choose auto, inference, training or as-written"
            )
        for key in ("warmup", "steps", "repeats"):
            if not isinstance(r[key], int) or r[key] < (1 if key != "warmup" else 0):
                raise errors.usage(f"{key} must be a positive integer, got {r[key]!r}")
        options = r.get("options") or {}
        settings = Settings(
            warmup=r["warmup"],
            steps=r["steps"],
            repeats=r["repeats"],
            timing_budget_s=float(options.get("timing_budget_s", 3.0)),
            lines=bool(options.get("lines", True)),
            trace=bool(options.get("trace", True)),
            timing=bool(options.get("timing", True)),
            settle_steps=int(options.get("settle_steps", Settings.settle_steps)),
            attribution=str(options.get("attribution", Settings.attribution)),
            attribution_limit=_limit(options.get("attribution_limit", Settings.attribution_limit)),
        )
        if settings.attribution not in ("full", "lines"):
            raise errors.usage(
                f"unknown attribution {settings.attribution!r}: choose full or lines"
            )
        return settings, mode, r["backend"]

    def run(self) -> dict:
        settings, mode, backend_name = self._settings()
        variants = self.request.get("variants") or []
        if not variants:
            raise errors.usage("the request names no variants")
        root = os.path.abspath(self.request.get("project_root") or os.getcwd())
        files = {
            os.path.abspath(os.path.join(root, p)): t
            for p, t in (self.request.get("files") or {}).items()
        }
        project = loader.Project(root=root, files=files)
        loader.materialize(root, self.request.get("sources") or {}, prune=True)
        artifacts_dir = self.request.get("artifacts_dir") or os.path.join(
            root, ".trnlens", "staging"
        )

        self.progress("importing", "torch")
        started = time.perf_counter()
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

        self.torch = torch
        torch_import_s = time.perf_counter() - started
        if torch_import_s > 0.05:
            # torch's own objects live as long as the process: move them out of the collector's
            # way, so the full collection between warm runs (main.py) scans only what runs made.
            gc.collect()
            gc.freeze()
        from . import backends

        options = dict(self.request.get("options") or {})
        if self.request.get("device"):
            options["device"] = self.request["device"]
        backend = backends.select(backend_name, torch, options, artifacts_dir)

        memory_cap = options.get("memory_cap_mb")
        reload_notes = self.reloader.prepare(project, torch, memory_cap)
        loader.install(project)
        self.comparing = len(variants) > 1
        settings.defer_timing = self.comparing and settings.timing
        results = []
        modules: dict[str, types.ModuleType] = {}
        try:
            for index, variant in enumerate(variants):
                self.variant_index = index
                run_id = new_run_id()
                # A rank of a multi-rank run writes where its coordinator says (rank-N/).
                out_dir = self.request.get("out_dir") or os.path.join(artifacts_dir, run_id)
                os.makedirs(out_dir, exist_ok=True)
                result = self._base_result(run_id, variant, project, backend, mode, settings)
                try:
                    self._run_variant(
                        result, variant, project, modules, backend, mode, settings, out_dir
                    )
                except Cancelled:
                    raise
                except errors.AgentError as exc:
                    if exc.kind != "user_code":
                        raise
                    # The user's code failed: the run is still a result (the editor shows it on
                    # the raising line, a comparison keeps the other variants).
                    result["error"] = exc.to_json()
                finally:
                    # What the backend noticed (during selection or profiling) belongs to this
                    # run.
                    result["warnings"][:0] = backend.warnings
                    backend.warnings.clear()
                    swaps.undo(self._swapped)  # a model in a module global outlives the variant
                    self._swapped = []
                results.append(result)
            if self.timed:
                self._interleaved_timing(results, settings)
        finally:
            # Also when a variant stopped the request (missing inputs, a bad directive): the
            # modules it imported stay loaded, and unrecorded they would never be reloaded when
            # their text changes (the next run would measure the old code).
            self.reloader.record(project)
        self.reloader.check_compile_settings(torch)  # may ask for a fresh process instead
        for note in reload_notes:
            results[0]["warnings"].append(f"warm agent: {note}")
        busy = _machine_load_warning()
        if busy:
            for result in results:
                result["warnings"].append(busy)
        if torch_import_s > 0.05:
            results[0]["warnings"].append(f"import torch took {torch_import_s:.1f} s (cold agent)")
        if len(results) == 1:
            results[0].pop("_output", None)
            return results[0]
        return self._comparison(results)

    # -- one variant
    def _base_result(self, run_id, variant, project, backend, mode, settings) -> dict:
        path = os.path.abspath(os.path.join(project.root, variant["path"]))
        context = self.request.get("context") or {}
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": run_id,
            "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
            "function": {
                "path": project.relpath(path),
                "qualname": variant.get("qualname"),
                "source_hash": None,
                "unsaved": path in project.files,
                "line": None,
                "end_line": None,
            },
            "variant": {
                "label": variant.get("label") or _default_label(variant),
                "kind": "source"
                if variant.get("source")
                else "swap"
                if variant.get("module_swaps")
                else ("compiled" if variant.get("compile") else "function"),
                "source_hash": None,
            },
            "target": context.get("target", "local"),
            "host": socket.gethostname(),
            "backend": backend.name,
            "device": backend.device_name(),
            "time_basis": backend.time_basis,
            "versions": backend.versions(),
            "git_commit": context.get("git_commit"),
            "mode": mode,
            "inputs": None,
            "warmup": settings.warmup,
            "steps": settings.steps,
            "dispatches_per_step": None,
            "wall_time_per_step_us": None,
            "cpu_time_per_step_us": None,
            "device_time_per_step_us": None,
            "peak_memory_bytes": None,
            "first_call_us": None,
            "ops": [],
            "lines": [],
            "timing": None,
            "artifacts": [],
            "warnings": [],
            "error": None,
        }

    def _run_variant(self, result, variant, project, modules, backend, mode, settings, out_dir):
        torch = self.torch
        variant_started = time.perf_counter()
        path = os.path.abspath(os.path.join(project.root, variant["path"]))
        qualname = variant.get("qualname") or ""
        relpath = project.relpath(path)
        try:
            text = project.read(path)
        except FileNotFoundError:
            raise errors.usage(f"no such file: {relpath}") from None
        except UnicodeDecodeError as exc:
            raise errors.usage(f"{relpath} is not UTF-8 text: {exc}") from None
        try:
            definition = sources.find_definition(text, qualname, relpath)
        except SyntaxError as exc:
            raise errors.AgentError(
                "user_code",
                f"SyntaxError: {exc.msg}",
                type_="SyntaxError",
                path=relpath,
                line=exc.lineno,
            ) from None
        except sources.DefinitionNotFound as exc:
            raise errors.usage(str(exc)) from None
        result["function"].update(
            source_hash=sources.source_hash(text, definition),
            line=definition.def_line,
            end_line=definition.end_line,
        )
        self.progress("importing", relpath)
        module = modules.get(path)
        if module is None:
            try:
                module = loader.import_file(project, path)
            except errors.AgentError:
                raise
            except (Exception, SystemExit) as exc:  # sys.exit() at import is the code's failure
                raise errors.from_user_code(exc, project.is_project_file, project.relpath) from None
            modules[path] = module
        target = loader.resolve(module, qualname)

        self.progress("building-inputs")
        _reseed(torch)
        made, source_desc = self._inputs(
            module, target, definition, text, relpath, project, backend
        )
        made = self._from_snapshot((path, source_desc), made)
        made.args = inputs.to_device(made.args, backend.device, torch)
        made.kwargs = inputs.to_device(made.kwargs, backend.device, torch)
        if variant.get("module_swaps"):
            self._swap(variant, made, module, result)
        call = self._callable(target, definition, made, variant, module, result, backend)
        mode, result["mode_reason"], trains = _choose_mode(
            mode, call, target, module, made, project, torch
        )
        result["mode"] = mode
        reachable = attribution.reachable_modules(torch, attribution.input_roots(made, call, torch))
        flags = [(m, m.training) for _, m in reachable]  # each module's own, restored after
        if isinstance(made.instance, torch.nn.Module):
            made.instance.to(backend.device)
            if mode != "as-written":  # as written: the module stays in the mode it was built in
                made.instance.train(mode == "training")
        if mode == "inference" and reachable:
            # Inference means eval: BatchNorm's batch statistics and running-stat updates and
            # Dropout are training work, not what a deployed model dispatches.
            for name, m in reachable:
                if "." not in name:
                    m.eval()  # the roots' own eval(), for modules that override train()
            for _, m in reachable:
                m.training = False
            switched = sum(1 for _, was in flags if was)
            roots = sorted({name.split(".")[0] for name, _ in reachable})
            result["eval_modules"] = {
                "modules": len(reachable),
                "were_training": switched,
                "roots": roots,
                "message": (
                    f"inference runs in eval(): {len(reachable)} nn.Modules reachable from "
                    f"{', '.join(roots)} ({switched} of them in training mode) ran in eval() and "
                    "got their own training flags back after the run"
                ),
            }
        try:
            self._measure(result, variant, call, made, mode, trains, target, path, qualname,
                          relpath, definition, project, backend, settings, out_dir,
                          variant_started, source_desc, reachable, module)  # fmt: skip
        finally:
            for m, was in flags:
                m.training = was

    def _measure(self, result, variant, call, made, mode, trains, target, path, qualname, relpath,
                 definition, project, backend, settings, out_dir, variant_started, source_desc,
                 reachable, module):  # fmt: skip
        torch = self.torch
        result["inputs"] = inputs.describe_inputs(made, source_desc, torch)
        if mode == "training" and trains is not None:
            raise errors.usage(
                f"training mode adds a backward after each call, but {qualname} already calls "
                f"{trains.what} at {trains.path}:{trains.line}: profile it with --mode as-written "
                "(mode auto picks it)",
                path=trains.path,
                line=trains.line,
            )
        compiled = bool(variant.get("compile")) or _is_compiled(call, torch)
        step = _make_step(call, made, mode, torch, project, (relpath, definition.def_line))
        measured_step, compile_log = step, None
        options = self.request.get("options") or {}
        # On for every run: a compiled callee or a module-level torch.compile(model) compiles
        # during an eager run too (issue 21); a run where nothing compiled has no compile section.
        # (torch._dynamo is loaded anyway: _is_compiled reads it, and torch.profiler imports
        # torch._inductor, which imports it.)
        if options.get("compile_log", True):  # compilelog.py; off only to measure it
            compile_log = CompileLog(torch, project.is_project_file, project.relpath,
                                     settings.warmup).start()  # fmt: skip
            measured_step = compile_log.wrap(step)
        measurer = Measurer(
            torch,
            backend,
            lambda: _mode_context(torch, mode),
            settings,
            self.progress,
            self.cancelled,
            named_modules=reachable,
            compile_log=compile_log,
            lockstep=self.lockstep,
        )
        if mode == "training":  # the backward it adds counts on the def line (events.py)
            measurer.extra_labels[ADDED_BACKWARD_LABEL] = (relpath, definition.def_line)
        kept: dict[str, Any] = {}
        # The first call's output, from the snapshot's state and freshly seeded RNGs: identical
        # code gives identical outputs however many steps each variant's passes run after it.
        measurer.keep_first_output = lambda out: kept.setdefault("output", _cpu_copy(out, torch))
        if self.comparing and self.variant_index == 0 and not compiled:
            snap_key, source, snap_made = (path, source_desc), variant, made

            def replay():
                again = self._from_snapshot(snap_key, snap_made)
                if again is snap_made:  # no copy to start from
                    return None
                again.args = inputs.to_device(again.args, backend.device, torch)
                again.kwargs = inputs.to_device(again.kwargs, backend.device, torch)
                if isinstance(again.instance, torch.nn.Module):
                    again.instance.to(backend.device)
                    if mode != "as-written":
                        again.instance.train(mode == "training")
                call2 = self._callable(target, definition, again, source, module,
                                       {"variant": dict(result["variant"])}, backend)  # fmt: skip
                step2 = _make_step(
                    call2, again, mode, torch, project, (relpath, definition.def_line)
                )
                _reseed(torch)
                with _mode_context(torch, mode):
                    return _cpu_copy(step2(), torch)

            self.replay = replay
        try:
            _reseed(torch)
            m = measurer.run(measured_step, compiled=compiled, out_dir=out_dir, project=project)
            output = kept.get("output")
        except Cancelled:
            raise
        except errors.AgentError:
            raise
        except (Exception, SystemExit) as exc:  # sys.exit() in the code is the code's failure
            failure = errors.from_user_code(exc, project.is_project_file, project.relpath)
            if mode == "inference" and trains is not None:
                failure.message += (
                    f" ({qualname} calls {trains.what} at {trains.path}:{trains.line}, which "
                    "inference mode cannot run: --mode as-written runs it as written)"
                )
            raise failure from None
        finally:
            if compile_log is not None:
                compile_log.stop()
        if compile_log is not None:
            reuse = (path, qualname, result["function"]["source_hash"], variant.get("source"),
                     bool(variant.get("compile")), id(target))  # fmt: skip
            found = compile_log.finish(reuse if compiled else None)
            if compiled or found["compiled_in_run"]:
                found["scope"] = "function" if compiled else "callee"
                result["compile"] = found
        result["accounting"] = {
            "steps_us": m.steps_us,
            "variant_us": (time.perf_counter() - variant_started) * 1e6,
        }
        for key in (
            "dispatches_per_step",
            "wall_time_per_step_us",
            "cpu_time_per_step_us",
            "device_time_per_step_us",
            "peak_memory_bytes",
            "first_call_us",
            "ops",
            "kernels",
            "kernel_launches_per_step",
            "lines",
            "timing",
            "profiled_timing",
            "stability",
            "artifacts",
            "findings",
            "launch",
            "time_scale",
        ):
            result[key] = getattr(m, key)
        _add_line_texts(result["lines"], project)
        if mode == "training":
            for entry in result["lines"] or []:
                if (entry["path"], entry["line"]) == (relpath, definition.def_line):
                    entry["label"] = "backward added by training mode"
        if m.attribution_us is not None:
            result["accounting"]["attribution_us"] = m.attribution_us
        if m.frames is not None:
            keys = ("frames", "frames_rest", "modules", "modules_rest", "host_syncs",
                    "library_files")  # fmt: skip
            for key in keys:
                result[key] = getattr(m, key)
        if m.rank_timeline is not None:
            result["rank_timeline"] = m.rank_timeline
        if m.dispatch_sites is not None:
            result["dispatch_sites"] = m.dispatch_sites
            result["dispatch_shapes"] = m.dispatch_shapes
        result["warnings"].extend(m.warnings)
        result["_output"] = output
        if settings.defer_timing:
            self.timed.append((self.variant_index, measurer, m, step))

    def _inputs(self, module, target, definition, text, relpath, project, backend):
        directives = sources.read_directives(text, definition)
        if "inputs" not in directives and definition.kind == "method":
            cls_name = definition.qualname.rsplit(".", 1)[0]
            cls_def = sources.find_definition(text, cls_name, relpath)
            directives = sources.read_directives(text, cls_def)
        factory = self.request.get("inputs") or directives.get("inputs")
        if factory:
            value = inputs.call_factory(
                module, factory, backend.device, relpath, project.is_project_file, project.relpath
            )
            return inputs.unpack_factory_result(value, definition, factory), f"directive:{factory}"
        if definition.kind == "function" and inputs.defaults_suffice(target):
            return inputs.Inputs((), {}), "defaults"
        raise errors.usage(
            inputs.missing_inputs_message(definition, relpath),
            type_="InputsMissing",
            path=relpath,
            line=definition.def_line,
        )

    def _swap(self, variant, made, module, result) -> None:
        """Library methods swapped for their fixes on this run's instances (swaps.py)."""
        import hashlib

        torch = self.torch
        held = [v for v in vars(module).values() if isinstance(v, torch.nn.Module)]
        roots = [made.instance, made.args, made.kwargs, *held]
        label = result["variant"]["label"]
        self._swapped = swaps.apply(variant["module_swaps"], roots, torch, label)
        text = "\n".join(str(s.get("source")) for s in variant["module_swaps"])
        result["variant"]["source_hash"] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
        result["variant"]["swaps"] = [
            {"type_path": s.get("type_path"), "method": s.get("method")}
            for s in variant["module_swaps"]
        ]
        result["variant"]["swapped_instances"] = swaps.count(self._swapped)

    def _callable(self, target, definition, made, variant, module, result, backend):
        torch = self.torch
        source = variant.get("source")
        if source:
            import hashlib

            result["variant"]["source_hash"] = (
                "sha256:" + hashlib.sha256(source.encode()).hexdigest()
            )
            replaces = variant.get("replaces") or definition.qualname
            namespace = loader.exec_variant_source(module, source, result["variant"]["label"])
            name = replaces.split(".")[-1]
            if (
                name not in namespace
                or namespace[name] is getattr(module, name, None)
                and "." not in replaces
            ):
                raise errors.usage(
                    f"variant {result['variant']['label']!r}: its source defines no {name!r}"
                )
            replacement = namespace[name]
            if "." in replaces:
                if made.instance is None:
                    raise errors.usage(
                        f"variant replacing {replaces} needs an instance (inputs factory)"
                    )
                setattr(made.instance, name, types.MethodType(replacement, made.instance))
            else:
                target = replacement
        if definition.kind == "function":
            call = target
        elif definition.kind == "class":
            if made.instance is None:
                raise errors.usage(
                    f"{definition.qualname} needs (instance, args) from its inputs factory"
                )
            call = made.instance
        else:
            if made.instance is None:
                raise errors.usage(
                    f"{definition.qualname} needs (instance, args) from its inputs factory"
                )
            call = getattr(made.instance, definition.qualname.split(".")[-1])
        if variant.get("compile"):
            self.progress("compiling", "torch.compile")
            if backend.compile_backend:
                call = torch.compile(call, backend=backend.compile_backend)
            else:
                call = torch.compile(call)
        return call

    def _from_snapshot(self, key: tuple, made: inputs.Inputs) -> inputs.Inputs:
        """The inputs a variant starts from: in a comparison, a deep copy of the snapshot taken
        of the first variant's inputs with the same key (instance, args and kwargs copied
        together, so an optimizer in the args keeps pointing at the copied module's
        parameters); ``made`` itself when there is nothing to copy from."""
        if not self.comparing:
            return made
        snap = self.snapshots.get(key)
        if snap is None:
            try:
                snap = copy.deepcopy((made.instance, made.args, made.kwargs, made.description))
            except Exception as exc:  # a tensor in the middle of a graph, a lock, a generator
                self.snapshots[key] = False
                self.state_notes.append(
                    f"the inputs could not be copied ({type(exc).__name__}: {exc}): each variant "
                    "built its own, and state they share outside the inputs carries over"
                )
                return made
            self.snapshots[key] = snap
            return made  # its state is the snapshot's: nothing has run on it yet
        if snap is False:
            return made
        instance, args, kwargs, description = copy.deepcopy(snap)
        return inputs.Inputs(args, kwargs, instance, description)

    def _interleaved_timing(self, results: list[dict], settings: Settings) -> None:
        """Times the variants that ran in interleaved rounds (rounds.py) and gives each its
        figures, stability verdict and warnings; the per-round times stay for the ratios."""
        self.variant_index = 0
        self.progress("timing", f"up to {settings.repeats} interleaved rounds")
        timed = [entry for entry in self.timed if not results[entry[0]]["error"]]
        if not timed:
            return

        def check():
            if self.cancelled():
                raise Cancelled()

        calls = [
            (lambda measurer=measurer, step=step: measurer.round_call(step))
            for _, measurer, _, step in timed
        ]
        samples = rounds.interleave(
            calls,
            settings.repeats,
            settings.timing_budget_s * len(calls),
            settle_rounds=2,
            check=check,
        )
        for (index, measurer, m, _), times in zip(timed, samples, strict=True):
            faults = measurer.round_faults[-len(times) :] if times else []
            measurer.finish(m, timing_figures(times, faults) if times else None)
            result = results[index]
            result["timing"] = m.timing
            result["stability"] = m.stability
            result["time_scale"] = m.time_scale  # lines and findings were rescaled in place
            result["warnings"].extend(w for w in m.warnings if w not in result["warnings"])
            result["accounting"]["steps_us"] = m.steps_us
            result["_rounds"] = times

    def _comparison(self, results: list[dict]) -> dict:
        torch = self.torch
        base = results[0]
        speedups, ranges, diffs = [], [], []
        baseline_out = base.get("_output")
        not_comparable = self._outputs_note(base, torch)
        for r in results:
            if r.get("_rounds") and base.get("_rounds") and not r["error"] and not base["error"]:
                speedup, span = rounds.ratio_figures(base["_rounds"], r["_rounds"])
            else:
                speedup, span = None, None
            speedups.append(speedup)
            ranges.append(span)
            diffs.append(
                None if not_comparable else _max_abs_diff(baseline_out, r.get("_output"), torch)
            )
        warnings = list(self.state_notes)
        if not_comparable:
            warnings.append(not_comparable)
        if len({str(r["inputs"]) for r in results if r["inputs"]}) > 1:
            warnings.append("the variants ran on different inputs: compare their figures with care")
        for index, r in enumerate(results):
            r.pop("_output", None)
            r.pop("_rounds", None)
            # Kept on each stored variant too: the comparison envelope itself is not stored.
            r["comparison"] = {
                "baseline_run_id": base["run_id"],
                "index": index,
                "speedup": speedups[index],
                "speedup_range": ranges[index],
                "speedup_method": "rounds",
                "max_abs_diff": diffs[index],
            }
            if not_comparable:
                r["comparison"]["outputs_not_comparable"] = not_comparable
        found = {
            "schema_version": SCHEMA_VERSION,
            "variants": results,
            "baseline": 0,
            "speedups": speedups,
            "speedup_ranges": ranges,
            "speedup_method": "rounds",
            "max_abs_diff": diffs,
            "warnings": warnings,
        }
        if not_comparable:
            found["outputs_not_comparable"] = not_comparable
        return found

    def _outputs_note(self, base: dict, torch) -> str | None:
        """Why the variants' outputs cannot be compared, or None: the baseline's first call,
        made again from a fresh copy of the same snapshot with the same seeds, must give the
        same output, or what it returns depends on state outside its inputs (module globals,
        files) or on nondeterminism, and any difference between variants means nothing."""
        if self.replay is None or base["error"] or not base.get("_output"):
            return None  # no tensor output: there is no difference to give anyway
        try:
            again = self.replay()
        except Exception as exc:  # the code ran once already: a second failure is still a fact
            return (
                "outputs not comparable: the baseline could not be run again from the same "
                f"state ({type(exc).__name__}: {exc})"
            )
        if again is None:
            return None
        drift = _max_abs_diff(base["_output"], again, torch)
        if drift is not None and drift != drift:  # NaN: no difference can be read from it
            return "outputs not comparable: the baseline's output contains NaN"
        if drift is None or drift > 0:
            what = "a different shape" if drift is None else f"max |diff| {drift:.3g}"
            return (
                "outputs not comparable: the baseline run twice from the same inputs and seeds "
                f"gave different outputs ({what}): they depend on state outside the inputs "
                "(module globals, files) or on nondeterminism, so no max |diff| is given"
            )
        return None


def _limit(value) -> int:
    """The attribution's row limit: a positive integer, or "all"."""
    if value == "all":
        return 1_000_000
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise errors.usage(f"attribution_limit must be a positive integer or 'all', got {value!r}")
    return value


def _machine_load_warning() -> str | None:
    """Other work on the machine makes timings noisy (and OpenMP barriers slow): say so."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return None
    cores = os.cpu_count() or 1
    if load <= cores:
        return None
    return (
        f"the machine is busy (load {load:.1f} on {cores} cores): timings are noisy; "
        "compare runs made under similar load"
    )


def _default_label(variant: dict) -> str:
    label = variant.get("qualname") or "?"
    if variant.get("source"):
        return f"{label} (fixed)"
    if variant.get("compile"):
        return f"{label} (compiled)"
    return label


def _is_compiled(obj, torch) -> bool:
    if hasattr(obj, "_torchdynamo_orig_callable"):
        return True
    optimized = getattr(getattr(torch, "_dynamo", None), "eval_frame", None)
    cls = getattr(optimized, "OptimizedModule", None)
    return bool(cls and isinstance(obj, cls))


def _choose_mode(requested, call, target, module, made, project, torch):
    """(mode, why, the training call found or None): auto resolves here, per variant."""
    function = getattr(call, "forward", call) if made.instance is call else call
    try:
        found = steps.find_training_call(function, module, made.instance, project, torch)
    except Exception:  # a static look must never fail the run; say so and fall back
        found = None
    if requested != "auto":
        return requested, "requested", found
    if found is not None:
        why = f"auto: calls {found.what} at {found.path}:{found.line} (a training step)"
        return "as-written", why, found
    return "inference", "auto: calls no backward or optimizer step", None


@contextmanager
def _mode_context(torch, mode: str):
    with ExitStack() as stack:
        if mode == "inference":
            stack.enter_context(torch.inference_mode())
        else:
            stack.enter_context(torch.enable_grad())
        yield


def _make_step(call, made, mode: str, torch, project, where: tuple[str, int]) -> Callable[[], Any]:
    is_project_file, relpath = project.is_project_file, project.relpath
    args, kwargs = made.args, made.kwargs
    if mode in ("inference", "as-written"):
        return lambda: call(*args, **kwargs)
    leaves = []
    if isinstance(made.instance, torch.nn.Module):
        leaves.extend(p for p in made.instance.parameters() if p.requires_grad)
    else:
        for value in _tensors(args) + _tensors(list(kwargs.values())):
            if value.is_floating_point() and value.is_leaf:
                value.requires_grad_(True)
                leaves.append(value)
    if not leaves:
        raise errors.usage(
            "training mode needs something to differentiate: a module with parameters, or "
            "floating-point tensor arguments"
        )

    def step():
        for leaf in leaves:
            leaf.grad = None
        out = call(*args, **kwargs)
        outs = [t for t in _tensors(out) if t.requires_grad]
        if not outs:
            raise errors.usage("training mode: the function returned no tensor that requires grad")
        try:
            with torch.autograd.profiler.record_function(ADDED_BACKWARD_LABEL):
                sum(t.float().sum() for t in outs).backward()
        except Exception as exc:
            # Our backward has no project frame: name the profiled function's line instead.
            failure = errors.from_user_code(exc, is_project_file, relpath)
            failure.message += " (in the backward that training mode adds after the call)"
            if failure.path is None:
                failure.path, failure.line = where
            raise failure from None
        return out

    return step


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _add_line_texts(lines: list, project) -> None:
    """Each measured line's source text (stripped): ``trnlens diff`` matches lines of two runs
    by it, so that a line keeps its figures when an edit above it moved it."""
    texts: dict[str, list[str] | None] = {}
    for entry in lines or []:
        path = entry.get("path")
        if path not in texts:
            try:
                texts[path] = project.read(os.path.join(project.root, path)).splitlines()
            except (OSError, UnicodeDecodeError):
                texts[path] = None
        found = texts[path]
        line = entry.get("line") or 0
        if found is not None and 0 < line <= len(found):
            entry["text"] = found[line - 1].strip()


def _cpu_copy(out, torch) -> list:
    """The output's tensors, copied to the host now: later steps may change them in place."""
    return [t.detach().to("cpu", copy=True) for t in _tensors(out)]


def _reseed(torch) -> None:
    """The same RNG state before each variant's inputs and first call (torch's, Python's and
    numpy's where the code imported it): dropout and random inputs then agree across variants."""
    import random

    torch.manual_seed(0)
    random.seed(0)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(0)


def _max_abs_diff(a, b, torch) -> float | None:
    if a is None or b is None or len(a) != len(b) or not a:
        return None
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            return None
        if x.numel():
            worst = max(worst, float((x.double() - y.double()).abs().max()))
    return worst
