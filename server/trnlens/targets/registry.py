"""Targets by name: ``local`` built in, the rest from ``[tool.trnlens.targets.NAME]`` (or settings).

Fields: ``host`` (anything ssh accepts; resolved by the user's own ssh config), ``ssh_args``
(extra ssh arguments, e.g. ``["-F", "path"]``), ``python`` (default ``python3`` remotely, this
interpreter locally), ``workdir``, ``backend`` (default ``auto``), ``env``, ``remote_root``,
``nproc_per_node`` (ranks per run under torchrun, default 1), ``address`` (where other hosts reach
this one in a multi-host run; default: ``host`` without its user).
A target with a ``host`` is an SSH target; ``kind`` may say so explicitly. A target with ``nodes``
(a list of other targets' names, and ``nproc_per_node``) runs on all of them at once: one torchrun
per host, the first hosting the rendezvous (targets/nodes.py, multihost.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from trnlens.targets.base import TargetError
from trnlens.targets.local import LocalTarget
from trnlens.targets.nodes import NodesTarget
from trnlens.targets.ssh import SshTarget

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

LOCAL = "local"
_ADDRESS = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:_-]{0,252}")  # a name, IPv4 or IPv6, no option
FIELDS = {"kind", "host", "ssh_args", "python", "workdir", "backend", "env", "remote_root",
          "nproc_per_node", "address", "nodes"}  # fmt: skip
NODES_FIELDS = {"kind", "nodes", "nproc_per_node", "backend"}


def project_targets(root: Path) -> dict[str, dict[str, Any]]:
    """``[tool.trnlens.targets.*]`` from the project's pyproject.toml (empty when absent)."""
    path = Path(root) / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TargetError(f"{path} does not parse: {exc}") from None
    targets = data.get("tool", {}).get("trnlens", {}).get("targets", {})
    if not isinstance(targets, dict):
        raise TargetError(f"{path}: [tool.trnlens.targets] must be a table of targets")
    return targets


def from_fields(
    name: str, fields: dict[str, Any], others: dict[str, dict[str, Any]] | None = None
) -> LocalTarget | SshTarget | NodesTarget:
    """The target ``fields`` define; ``others`` (every target's fields by name) is where a
    multi-host target's ``nodes`` are looked up."""
    if not isinstance(fields, dict):
        raise TargetError(f"target {name!r} must be a table of fields")
    unknown = set(fields) - FIELDS
    if unknown:
        raise TargetError(f"target {name!r} has unknown fields: {', '.join(sorted(unknown))}")
    if "nodes" in fields or fields.get("kind") == "nodes":
        return _nodes(name, fields, others or {})
    kind = fields.get("kind") or ("ssh" if fields.get("host") else "local")
    env = {str(k): str(v) for k, v in (fields.get("env") or {}).items()}
    nproc = fields.get("nproc_per_node")
    if nproc is not None and (not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1):
        raise TargetError(f"target {name!r}: nproc_per_node must be a positive integer")
    address = fields.get("address")
    if address is not None and (not isinstance(address, str) or not _ADDRESS.fullmatch(address)):
        raise TargetError(f"target {name!r}: address must be a host name or IP address")
    if kind == "local":
        return LocalTarget(name=name, python=fields.get("python"), env=env, nproc_per_node=nproc,
                           address=address)  # fmt: skip
    if kind != "ssh":
        raise TargetError(f"target {name!r}: kind must be local or ssh, not {kind!r}")
    if not fields.get("host"):
        raise TargetError(f"target {name!r} is an ssh target without a host")
    ssh_args = fields.get("ssh_args") or []
    if not isinstance(ssh_args, list) or not all(isinstance(a, str) for a in ssh_args):
        raise TargetError(f"target {name!r}: ssh_args must be a list of strings")
    return SshTarget(
        name=name,
        host=str(fields["host"]),
        ssh_args=list(ssh_args),
        python=str(fields.get("python") or "python3"),
        workdir=str(fields.get("workdir") or ".cache/trnlens"),
        backend=str(fields.get("backend") or "auto"),
        env=env,
        remote_root=fields.get("remote_root"),
        nproc_per_node=nproc,
        address=address,
    )


def _nodes(name: str, fields: dict[str, Any], others: dict[str, dict[str, Any]]) -> NodesTarget:
    extra = set(fields) - NODES_FIELDS
    if extra:
        raise TargetError(
            f"target {name!r} runs on its nodes: {', '.join(sorted(extra))} belong on each node's "
            "own target"
        )
    names = fields.get("nodes")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TargetError(f"target {name!r}: nodes must be a list of target names")
    nodes = []
    for node in names:
        if node == name or node not in others:
            known = ", ".join(sorted(n for n in others if n != name)) or "none"
            raise TargetError(f"target {name!r}: node {node!r} is not a target (defined: {known})")
        if "nodes" in others[node]:
            raise TargetError(f"target {name!r}: node {node!r} is itself a multi-host target")
        built = from_fields(node, others[node])
        assert not isinstance(built, NodesTarget)
        nodes.append(built)
    nproc = fields.get("nproc_per_node", 1)
    if not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1:
        raise TargetError(f"target {name!r}: nproc_per_node must be a positive integer")
    return NodesTarget(name=name, nodes=nodes, nproc_per_node=nproc,
                       backend=str(fields.get("backend") or "auto"))  # fmt: skip


def resolve(
    name: str | None, root: Path, python: str | None = None
) -> LocalTarget | SshTarget | NodesTarget:
    """The target called ``name`` (default ``local``) for a project."""
    name = name or LOCAL
    defined = project_targets(root)
    if name in defined:
        target = from_fields(name, defined[name], defined)
        if python:  # --python wins over the configured interpreter
            for one in target.nodes if isinstance(target, NodesTarget) else [target]:
                one.python = python
        return target
    if name == LOCAL:
        return LocalTarget(python=python)
    known = ", ".join([LOCAL, *sorted(defined)])
    raise TargetError(
        f"unknown target {name!r} (defined: {known}); add [tool.trnlens.targets.{name}] with a "
        "host to pyproject.toml"
    )
