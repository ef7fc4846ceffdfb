"""``trnlens targets`` lists where profiles can run; ``trnlens targets check NAME`` looks there."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from trnlens import project
from trnlens.cli import exitcodes
from trnlens.cli.render import table
from trnlens.targets import registry
from trnlens.targets.nodes import NodesTarget
from trnlens.targets.ssh import SshTarget, TargetError


def register(sub) -> None:
    parser = sub.add_parser(
        "targets",
        help="list targets, or check what one has",
        description="List the targets (local, and [tool.trnlens.targets.NAME] in pyproject.toml) "
        "or, with `check NAME`, say what is there (python, torch, torch_neuronx, devices, "
        "neuron-explorer) or exactly what is missing.",
    )
    parser.add_argument("action", nargs="?", choices=["list", "check"], default="list")
    parser.add_argument("name", nargs="?", default="local")
    parser.add_argument("--project", default=".", help="project directory (default: here)")
    parser.add_argument("--format", default="table", choices=["table", "json"])
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = project.find_root(Path(args.project).resolve())
    try:
        if args.action == "list":
            return _list(root, args.format)
        target = registry.resolve(args.name, root)
        # several hosts: each is checked (they all must be usable)
        hosts = target.nodes if isinstance(target, NodesTarget) else [target]
        reports = [asyncio.run(host.probe()) for host in hosts]
    except (TargetError, FileNotFoundError) as exc:
        print(f"trnlens: {exc}", file=sys.stderr)
        return exitcodes.TARGET_UNUSABLE
    if args.format == "json":
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=1))
    else:
        names = [args.name] if len(hosts) == 1 else [h.name for h in hosts]
        print("\n".join(_describe(n, h, r) for n, h, r in zip(names, hosts, reports, strict=True)))
    usable = all(r.get("torch") and not r.get("problems") for r in reports)
    return exitcodes.OK if usable else exitcodes.TARGET_UNUSABLE


def _list(root: Path, fmt: str) -> int:
    defined = registry.project_targets(root)
    rows = [["local", "local", "-", "(this interpreter)", "auto"]] if "local" not in defined else []
    listing = []
    for name, fields in sorted(defined.items()):
        target = registry.from_fields(name, fields, defined)
        if isinstance(target, NodesTarget):
            hosts = ", ".join(node.name for node in target.nodes)
            rows.append([name, "nodes", hosts, "(each node's)", target.backend])
        elif isinstance(target, SshTarget):
            rows.append([name, "ssh", target.host, target.python, target.backend])
        else:
            rows.append([name, "local", "-", target.python or "(this interpreter)", "auto"])
        listing.append({"name": name, **fields})
    if fmt == "json":
        print(json.dumps(listing, indent=1))
    else:
        print("\n".join(table(["Name", "Kind", "Host", "Python", "Backend"], rows, set())))
    return exitcodes.OK


def _describe(name: str, target, report: dict) -> str:
    where = target.host if isinstance(target, SshTarget) else "this machine"
    lines = [f"target {name} on {where} ({report.get('host')})"]
    lines.append(f"  python          {report.get('python')}  {report.get('executable')}")
    lines.append(f"  torch           {report.get('torch') or 'MISSING'}")
    lines.append(f"  torch_neuronx   {report.get('torch_neuronx') or '-'}")
    lines.append(f"  torch_xla       {report.get('torch_xla') or '-'}")
    lines.append(f"  cuda devices    {report.get('cuda_devices')}")
    cores = report.get("neuron_cores")
    visible = report.get("visible_cores")
    lines.append(
        f"  NeuronCores     {cores if cores is not None else '-'}"
        + (f" (NEURON_RT_VISIBLE_CORES={visible})" if visible else "")
    )
    lines.append(f"  neuron-explorer {report.get('neuron_explorer') or '- (aws-neuronx-tools)'}")
    for problem in report.get("problems", []):
        lines.append(f"  problem: {problem}")
    return "\n".join(lines)
