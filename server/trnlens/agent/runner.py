"""One profile request: import the user's code, build inputs, measure each variant, make results.

A request names one or more variants to run on the same inputs. Each variant is the function at
``path::qualname``, optionally replaced by ``source`` text (a generated fix: it is exec'd in a copy
of the module's globals and stands in for ``replaces``, default ``qualname``), optionally wrapped
in ``torch.compile`` (``compile: true``; ``backend="neuron"`` on Neuron).
"""

from __future__ import annotations

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

from . import attribution, errors, inputs, loader, sources, steps, swaps
from .compilelog import CompileLog
from .measure import Cancelled, Measurer, Settings
from .protocol import SCHEMA_VERSION
from .reloader import Reloader

PROCESS_RELOADER = Reloader()

DEFAULTS = {"backend": "auto", "warmup": 3, "steps": 5, "repeats": 20, "mode": "auto"}
# auto: as-written when the function is a training step (steps.py), else inference.
MODES = ("auto", "inference", "training", "as-written")


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
    ):
        self.request = request
        # One reloader per process: what this process has loaded is the process's state.
        self.reloader = reloader or PROCESS_RELOADER
        self._progress = progress
        self.cancelled = cancelled
        self.variant_index = 0
        self.torch = None
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
        results = []
        modules: dict[str, types.ModuleType] = {}
        for index, variant in enumerate(variants):
            self.variant_index = index
            run_id = new_run_id()
            out_dir = os.path.join(artifacts_dir, run_id)
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
                # The user's code failed: the run is still a result (the editor shows it on the
                # raising line, a comparison keeps the other variants).
                result["error"] = exc.to_json()
            finally:
                # What the backend noticed (during selection or profiling) belongs to this run.
                result["warnings"][:0] = backend.warnings
                backend.warnings.clear()
                swaps.undo(self._swapped)  # a model in a module global outlives the variant
                self._swapped = []
            results.append(result)
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
        torch.manual_seed(0)
        made, source_desc = self._inputs(
            module, target, definition, text, relpath, project, backend
        )
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
                          variant_started, source_desc, reachable)  # fmt: skip
        finally:
            for m, was in flags:
                m.training = was

    def _measure(self, result, variant, call, made, mode, trains, target, path, qualname, relpath,
                 definition, project, backend, settings, out_dir, variant_started, source_desc,
                 reachable):  # fmt: skip
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
        )
        try:
            m = measurer.run(measured_step, compiled=compiled, out_dir=out_dir, project=project)
            output = _output_of(step, torch, mode)
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
        ):
            result[key] = getattr(m, key)
        if m.attribution_us is not None:
            result["accounting"]["attribution_us"] = m.attribution_us
        if m.frames is not None:
            keys = ("frames", "frames_rest", "modules", "modules_rest", "host_syncs",
                    "library_files")  # fmt: skip
            for key in keys:
                result[key] = getattr(m, key)
        if m.dispatch_sites is not None:
            result["dispatch_sites"] = m.dispatch_sites
            result["dispatch_shapes"] = m.dispatch_shapes
        result["warnings"].extend(m.warnings)
        result["_output"] = output

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

    def _comparison(self, results: list[dict]) -> dict:
        torch = self.torch
        base = results[0]
        speedups, ranges, diffs = [], [], []
        baseline_out = base.get("_output")
        for r in results:
            t, b = r.get("timing"), base.get("timing")
            if t and b and not r["error"] and not base["error"]:
                speedups.append(b["median_us"] / t["median_us"])
                ranges.append([b["min_us"] / t["max_us"], b["max_us"] / t["min_us"]])
            else:
                speedups.append(None)
                ranges.append(None)
            diffs.append(_max_abs_diff(baseline_out, r.get("_output"), torch))
        warnings = []
        if len({str(r["inputs"]) for r in results if r["inputs"]}) > 1:
            warnings.append("the variants ran on different inputs: compare their figures with care")
        for index, r in enumerate(results):
            r.pop("_output", None)
            # Kept on each stored variant too: the comparison envelope itself is not stored.
            r["comparison"] = {
                "baseline_run_id": base["run_id"],
                "index": index,
                "speedup": speedups[index],
                "speedup_range": ranges[index],
                "max_abs_diff": diffs[index],
            }
        return {
            "schema_version": SCHEMA_VERSION,
            "variants": results,
            "baseline": 0,
            "speedups": speedups,
            "speedup_ranges": ranges,
            "max_abs_diff": diffs,
            "warnings": warnings,
        }


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


def _output_of(step, torch, mode) -> Any:
    with _mode_context(torch, mode):
        out = step()
    return [t.detach().to("cpu") for t in _tensors(out)]


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
