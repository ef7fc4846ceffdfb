"""Targets by name: ``local`` built in, the rest from ``[tool.trnlens.targets.NAME]`` (or settings).

Fields: ``host`` (anything ssh accepts; resolved by the user's own ssh config), ``ssh_args``
(extra ssh arguments, e.g. ``["-F", "path"]``), ``python`` (default ``python3`` remotely, this
interpreter locally), ``workdir``, ``backend`` (default ``auto``), ``env``, ``remote_root``,
``nproc_per_node`` (ranks per run under torchrun, default 1).
A target with a ``host`` is an SSH target; ``kind`` may say so explicitly.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from trnlens.targets.local import LocalTarget
from trnlens.targets.ssh import SshTarget, TargetError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

LOCAL = "local"
FIELDS = {"kind", "host", "ssh_args", "python", "workdir", "backend", "env", "remote_root",
          "nproc_per_node"}  # fmt: skip


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


def from_fields(name: str, fields: dict[str, Any]) -> LocalTarget | SshTarget:
    if not isinstance(fields, dict):
        raise TargetError(f"target {name!r} must be a table of fields")
    unknown = set(fields) - FIELDS
    if unknown:
        raise TargetError(f"target {name!r} has unknown fields: {', '.join(sorted(unknown))}")
    kind = fields.get("kind") or ("ssh" if fields.get("host") else "local")
    env = {str(k): str(v) for k, v in (fields.get("env") or {}).items()}
    nproc = fields.get("nproc_per_node")
    if nproc is not None and (not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1):
        raise TargetError(f"target {name!r}: nproc_per_node must be a positive integer")
    if kind == "local":
        return LocalTarget(name=name, python=fields.get("python"), env=env, nproc_per_node=nproc)
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
    )


def resolve(name: str | None, root: Path, python: str | None = None) -> LocalTarget | SshTarget:
    """The target called ``name`` (default ``local``) for a project."""
    name = name or LOCAL
    defined = project_targets(root)
    if name in defined:
        target = from_fields(name, defined[name])
        if python:  # --python wins over the configured interpreter
            target.python = python
        return target
    if name == LOCAL:
        return LocalTarget(python=python)
    known = ", ".join([LOCAL, *sorted(defined)])
    raise TargetError(
        f"unknown target {name!r} (defined: {known}); add [tool.trnlens.targets.{name}] with a "
        "host to pyproject.toml"
    )
