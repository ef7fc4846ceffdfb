"""Shared by the run subcommands (profile, compare): options, specs, running, exit codes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from trnlens import multihost, project, settings, warm
from trnlens.agent.protocol import Progress
from trnlens.cli import exitcodes, signals
from trnlens.jobs import AgentFailure, ProfileRequest, run_profile
from trnlens.store import Store, StoreError
from trnlens.targets import registry
from trnlens.targets.nodes import NodesTarget
from trnlens.targets.ssh import TargetError

DEFAULTS = settings.DEFAULTS
KIND_EXIT = {
    "usage": exitcodes.USAGE,
    "user_code": exitcodes.USER_CODE_FAILED,
    "environment": exitcodes.TARGET_UNUSABLE,
    "internal": exitcodes.TARGET_UNUSABLE,
    "cancelled": 130,
    "timeout": exitcodes.USER_CODE_FAILED,  # the code did not finish in time, not the target
}


class UsageError(Exception):
    pass


def _checked(convert, ok, what: str):
    """An argparse ``type`` that refuses values outside ``ok`` (a usage error: exit 2)."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what}, got {text!r}") from None
        if not ok(value) or value != value:  # NaN is no count or duration
            raise argparse.ArgumentTypeError(f"{what}, got {text!r}")
        return value

    return parse


positive_int = _checked(int, lambda v: v > 0, "must be a positive whole number")
non_negative_int = _checked(int, lambda v: v >= 0, "must be a whole number, 0 or more")
positive_float = _checked(float, lambda v: 0 < v < float("inf"), "must be a positive number")
non_negative_float = _checked(float, lambda v: 0 <= v < float("inf"), "must be a number, 0 or more")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        choices=list(settings.BACKENDS),
        help="where device time comes from (default: the target's, else auto: neuron, cuda, cpu)",
    )
    parser.add_argument(
        "--target",
        metavar="NAME",
        help="where to run: local (default) or a [tool.trnlens.targets.NAME] in pyproject.toml",
    )
    parser.add_argument("--device", help="device to run on, e.g. cuda:1 (default: the backend's)")
    parser.add_argument(
        "--no-memory",
        action="store_true",
        help="leave out the memory pass (the peak by kind, activations kept, growth: two more "
        "steps and torch's reading of them; docs/memory.md)",
    )
    # No argparse defaults below: a flag left out falls to [tool.trnlens], then the defaults
    # (settings.DEFAULTS), the same layers the editor folds (see run_settings).
    parser.add_argument(
        "--warmup",
        type=non_negative_int,
        help=f"warm-up steps, not measured ({DEFAULTS['warmup']})",
    )
    parser.add_argument("--steps", type=positive_int, help=f"profiled steps ({DEFAULTS['steps']})")
    parser.add_argument(
        "--repeats",
        type=positive_int,
        help=f"calls in the timing pass without the profiler ({DEFAULTS['repeats']})",
    )
    parser.add_argument(
        "--mode",
        choices=list(settings.MODES),
        help="auto (default): as-written when the function calls backward or an optimizer's "
        "step, else inference; inference: inference_mode + eval(); training: forward + an added "
        "backward; as-written: grad enabled, nothing added (a whole training step)",
    )
    parser.add_argument(
        "--inputs",
        metavar="NAME",
        help="inputs factory in the profiled module (overrides the directive)",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="interpreter with torch to run the agent (default: this one)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        metavar="SECONDS",
        help="stop the run after this long (default: [tool.trnlens] timeout_seconds, else no "
        "limit)",
    )
    parser.add_argument(
        "--nproc-per-node",
        type=int,
        default=None,
        metavar="N",
        help="run N ranks under torchrun (gloo on the CPU, nccl on CUDA) and report each rank, "
        "the slowest and the collectives (default: the target's nproc_per_node, else 1)",
    )
    parser.add_argument("--format", default="table", choices=["table", "json"])
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--warm",
        nargs="?",
        type=positive_float,
        const=600.0,
        metavar="SECONDS",
        help="run on a warm agent kept alive between calls for SECONDS (default 600)",
    )


def _nproc(args: argparse.Namespace, target) -> int:
    value = getattr(args, "nproc_per_node", None)
    if value is None:
        value = getattr(target, "nproc_per_node", None)
    return int(value) if value is not None else 1


def parse_spec(spec: str) -> tuple[Path, str]:
    if "::" not in spec:
        raise UsageError(f"expected PATH::QUALNAME (e.g. model.py::RMSNorm.forward), got {spec!r}")
    path_text, qualname = spec.rsplit("::", 1)
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"no such file: {path_text}")
    if not qualname or not all(part.isidentifier() for part in qualname.split(".")):
        raise UsageError(f"not a qualified name: {qualname!r}")
    return path, qualname


def run_settings(args: argparse.Namespace, root: Path) -> settings.Settings:
    """The run's settings, layered as in the editor: defaults < ``[tool.trnlens]`` in the
    project's pyproject.toml < the command line's flags (there is no editor layer here).
    Raises SettingsError naming the key and where its bad value came from."""
    flags = {
        "target": args.target, "backend": args.backend, "warmup": args.warmup,
        "steps": args.steps, "repeats": args.repeats, "mode": args.mode,
        "timeoutSeconds": args.timeout,
    }  # fmt: skip
    given = settings.Layer("command line", {k: v for k, v in flags.items() if v is not None})
    return settings.resolve([settings.pyproject_layer(root), given])


def execute(
    args: argparse.Namespace, variants: list[dict], root: Path, options: dict | None = None
):
    """Runs the request; returns (outcome or None, exit code, store)."""
    try:
        chosen = run_settings(args, root)
    except settings.SettingsError as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return None, exitcodes.USAGE, None
    try:
        target = registry.resolve(chosen.target, root, python=args.python)
    except TargetError as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return None, exitcodes.USAGE, None
    backend = chosen.backend
    own = getattr(target, "backend", None)  # a target's backend is more specific than the
    if own not in (None, "auto") and chosen.origins.get("backend") != "command line":  # project's
        backend = own
    # The editor needs a limit (nobody may be watching); the terminal runs until done or Ctrl-C
    # unless a flag or the project says otherwise.
    timeout: float | None = chosen.timeout_seconds
    if chosen.origins.get("timeoutSeconds") == "defaults":
        timeout = None
    try:
        store = Store(root)
    except StoreError as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return None, exitcodes.TARGET_UNUSABLE, None
    if store.recovered:
        print(f"trnlens: warning: {store.recovered}", file=sys.stderr)
    request = ProfileRequest(
        variants=variants, project_root=root, backend=backend, warmup=chosen.warmup,
        steps=chosen.steps, repeats=chosen.repeats, mode=chosen.mode, device=args.device,
        inputs=args.inputs, timeout_s=timeout,
        options={**(options or {}), **({"memory": False} if args.no_memory else {})},
        nproc_per_node=_nproc(args, target),
    )  # fmt: skip
    if request.nproc_per_node < 1:
        store.close()
        print("trnlens: --nproc-per-node must be at least 1", file=sys.stderr)
        return None, exitcodes.USAGE, None

    def progress(state: Progress) -> None:
        if not args.quiet:
            print(f"[{state.variant}] {state.words()}", file=sys.stderr)

    if args.warm is not None and isinstance(target, NodesTarget):
        store.close()
        print(f"trnlens: --warm keeps one host's agent; {target.name} runs on several hosts, "
              "whose agents start for each run", file=sys.stderr)  # fmt: skip
        return None, exitcodes.USAGE, None
    try:
        if args.warm is not None:
            work = warm.run_warm(request, chosen.target, args.python, args.warm, progress)
        elif isinstance(target, NodesTarget):
            work = multihost.run_profile(request, store, target, on_progress=progress)
        else:
            work = run_profile(request, store, target, on_progress=progress)
        outcome = signals.run(work)
    except AgentFailure as failure:
        error = failure.error
        where = f" at {error['path']}:{error['line']}" if error.get("path") else ""
        if error["kind"] == "timeout":  # its message names the phase and the line
            where = ""
        print(f"trnlens: {error['kind']} error{where}: {error['message']}", file=sys.stderr)
        if error.get("traceback") and error["kind"] != "usage":
            print(error["traceback"].rstrip(), file=sys.stderr)
        return None, KIND_EXIT.get(failure.kind, exitcodes.TARGET_UNUSABLE), None
    except StoreError as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return None, exitcodes.TARGET_UNUSABLE, None
    except signals.Terminated as stopped:
        try:  # after a SIGHUP the terminal may be gone
            print(f"trnlens: {stopped}; the agent was stopped", file=sys.stderr)
        except OSError:
            pass
        return None, stopped.exit_code, None
    finally:
        store.close()  # the run is stored; nothing else writes
    return outcome.data, exitcodes.OK, store  # the JSON the CLI prints and renders


def report(args: argparse.Namespace, outcome: dict, text: str, runs: list[dict]) -> int:
    """Prints the outcome (table text or JSON); the exit code says whether the user code failed."""
    print(json.dumps(outcome, indent=1) if args.format == "json" else text)
    failed = [run["error"] for run in runs if run.get("error")]
    if failed:
        return KIND_EXIT.get(failed[0]["kind"], exitcodes.USER_CODE_FAILED)
    return exitcodes.OK


def root_for(paths: list[Path]) -> Path:
    roots = {project.find_root(p) for p in paths}
    if len(roots) > 1:
        return Path(os.path.commonpath([str(r) for r in roots]))
    return roots.pop()
