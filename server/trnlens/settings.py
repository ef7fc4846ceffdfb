"""Settings: defaults, ``[tool.trnlens]`` in pyproject.toml, the client's options, layered.

Sources, later ones winning: defaults, the repository's ``[tool.trnlens]`` (snake_case keys),
``initializationOptions``, then ``workspace/configuration`` / ``didChangeConfiguration``. Each
source becomes a :class:`Layer` of canonical (camelCase, dotted) keys; :func:`resolve` folds them.

Trust: a cloned repository must not be able to run commands on a click, so targets and
interpreters that come from the repository itself (its pyproject.toml) are dropped when the client
says the workspace is untrusted; what was dropped is kept in ``Settings.refused`` so that the
server can say why a target is unknown.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI, a dependency there (pyproject.toml)
    import tomli as tomllib

from trnlens.agent.protocol import BACKENDS, MODES, RUN_DEFAULTS

LOCAL = "local"

# Canonical key -> (default, type check). The docs' settings table lists the same keys.
DEFAULTS: dict[str, Any] = {
    "target": LOCAL,
    "targets": {},
    **RUN_DEFAULTS,  # backend, warmup, steps, repeats, mode
    "hotspotThreshold": 0.2,
    "hints.enabled": True,
    "rules.select": [],
    "rules.ignore": [],
    "timeoutSeconds": 600,
    "regressionThreshold": 0.1,
    "baselineRef": "",
    "watch.enabled": True,
    "lenses.placement": "torch",
}
TARGET_KINDS = ("local", "ssh", "nodes")  # nodes: several hosts (targets/nodes.py)
# "torch": lenses on nn.Module classes, forward and functions using torch; "all": every function.
LENS_PLACEMENTS = ("torch", "all")


class SettingsError(ValueError):
    """A setting has a value of the wrong shape; the message names the key and its source."""


@dataclass(frozen=True)
class Layer:
    origin: str  # "defaults", "pyproject.toml", "initializationOptions", "workspace/configuration"
    values: dict[str, Any]
    from_repository: bool = False


@dataclass(frozen=True)
class TargetSettings:
    """A target as the settings define it (its fields); ``jobs.Target`` is what runs on one."""

    name: str
    kind: str = "local"
    python: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)  # everything else (host, user, ...)
    origin: str = "defaults"

    @property
    def is_local(self) -> bool:
        return self.kind == "local"


@dataclass(frozen=True)
class Settings:
    target: str = LOCAL
    targets: dict[str, TargetSettings] = field(default_factory=dict)
    backend: str = DEFAULTS["backend"]
    warmup: int = DEFAULTS["warmup"]
    steps: int = DEFAULTS["steps"]
    repeats: int = DEFAULTS["repeats"]
    mode: str = DEFAULTS["mode"]
    hotspot_threshold: float = DEFAULTS["hotspotThreshold"]
    hints_enabled: bool = DEFAULTS["hints.enabled"]
    rules_select: tuple[str, ...] = ()
    rules_ignore: tuple[str, ...] = ()
    timeout_seconds: float = DEFAULTS["timeoutSeconds"]
    # slowdown (share) from which a change can be a regression
    regression_threshold: float = DEFAULTS["regressionThreshold"]
    baseline_ref: str = DEFAULTS["baselineRef"]  # "" = the previous comparable run, else a ref
    watch_enabled: bool = DEFAULTS["watch.enabled"]
    lens_placement: str = DEFAULTS["lenses.placement"]
    origins: dict[str, str] = field(default_factory=dict)  # key -> the layer that set it
    refused: dict[str, str] = field(default_factory=dict)  # key or target -> why it was dropped

    def target_named(self, name: str | None = None) -> TargetSettings:
        """The named (default: the selected) target; raises KeyError with a reason."""
        name = name or self.target
        if name in self.targets:
            return self.targets[name]
        if name in self.refused:
            raise KeyError(self.refused[name])
        known = ", ".join(sorted(self.targets)) or "none"
        raise KeyError(f"unknown target {name!r} (defined: {known})")


# -- reading sources


def _flatten(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"hints": {"enabled": x}}`` -> ``{"hints.enabled": x}``; ``targets`` stays one value."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = prefix + _camel(str(key))
        if isinstance(value, dict) and name != "targets":
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _camel(key: str) -> str:
    """pyproject's snake_case keys (``hotspot_threshold``) -> ``hotspotThreshold``."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def client_layer(options: Any, origin: str) -> Layer:
    """A layer from initializationOptions or workspace/configuration.

    Accepts the section itself (``{"target": ...}``), a wrapper (``{"trnlens": {...}}``) or dotted
    keys (``{"trnlens.hints.enabled": false}``), since clients send all three shapes.
    """
    if not isinstance(options, dict):
        return Layer(origin, {})
    if isinstance(options.get("trnlens"), dict):
        options = options["trnlens"]
    values = _flatten(options)
    values = {k.removeprefix("trnlens."): v for k, v in values.items()}
    return Layer(origin, {k: v for k, v in values.items() if k in DEFAULTS})


def pyproject_layer(root: str | Path) -> Layer:
    """``[tool.trnlens]`` of the project's pyproject.toml (empty when absent or unreadable)."""
    path = Path(root) / "pyproject.toml"
    if not path.is_file():
        return Layer("pyproject.toml", {}, from_repository=True)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError):
        return Layer("pyproject.toml", {}, from_repository=True)
    section = data.get("tool", {}).get("trnlens", {})
    if not isinstance(section, dict):
        section = {}
    values = {k: v for k, v in _flatten(section).items() if k in DEFAULTS}
    return Layer("pyproject.toml", values, from_repository=True)


# -- folding layers


def resolve(layers: list[Layer], trusted: bool = True) -> Settings:
    """Folds layers (later wins) into Settings; raises SettingsError on a malformed value."""
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    refused: dict[str, str] = {}
    targets: dict[str, TargetSettings] = {LOCAL: TargetSettings(LOCAL)}
    for layer in [Layer("defaults", DEFAULTS), *layers]:
        for key, value in layer.values.items():
            runs_something = key == "targets" or (key == "target" and value != LOCAL)
            if layer.from_repository and not trusted and runs_something:
                what = f"target {value!r}" if key == "target" else "targets"
                refused[key] = f"{what} from {layer.origin} ignored: the workspace is not trusted"
                if key == "targets" and isinstance(value, dict):
                    for name in value:
                        refused[str(name)] = (
                            f"target {name!r} comes from {layer.origin} and the workspace is "
                            "not trusted: define it in your editor settings to use it"
                        )
                continue
            if key == "targets":
                # A target defined in two places is taken whole from the winner, never merged.
                for name, fields_ in _check_targets(value, layer.origin).items():
                    targets[name] = fields_
                    refused.pop(name, None)
                origins[key] = layer.origin
                continue
            merged[key] = value
            origins[key] = layer.origin
    return Settings(
        target=_check(merged, "target", str, origins),
        targets=targets,
        backend=_choice(merged, "backend", BACKENDS, origins),
        warmup=_count(merged, "warmup", origins, minimum=0),
        steps=_count(merged, "steps", origins, minimum=1),
        repeats=_count(merged, "repeats", origins, minimum=0),
        mode=_choice(merged, "mode", MODES, origins),
        hotspot_threshold=_share(merged, "hotspotThreshold", origins),
        hints_enabled=_check(merged, "hints.enabled", bool, origins),
        rules_select=tuple(_strings(merged, "rules.select", origins)),
        rules_ignore=tuple(_strings(merged, "rules.ignore", origins)),
        timeout_seconds=float(_check(merged, "timeoutSeconds", (int, float), origins)),
        regression_threshold=_non_negative(merged, "regressionThreshold", origins),
        baseline_ref=_check(merged, "baselineRef", str, origins).strip(),
        watch_enabled=_check(merged, "watch.enabled", bool, origins),
        lens_placement=_choice(merged, "lenses.placement", LENS_PLACEMENTS, origins),
        origins=origins,
        refused=refused,
    )


def _where(key: str, origins: dict[str, str]) -> str:
    return f"trnlens.{key} (from {origins.get(key, 'defaults')})"


def _check(merged: dict, key: str, kind, origins: dict[str, str]) -> Any:
    value = merged[key]
    if isinstance(value, bool) and kind is not bool and bool not in _as_tuple(kind):
        raise SettingsError(f"{_where(key, origins)} must be a number, got {value!r}")
    if not isinstance(value, kind):
        raise SettingsError(f"{_where(key, origins)} has the wrong type: {value!r}")
    return value


def _as_tuple(kind) -> tuple:
    return kind if isinstance(kind, tuple) else (kind,)


def _count(merged: dict, key: str, origins: dict[str, str], minimum: int) -> int:
    value = _check(merged, key, int, origins)
    if value < minimum:
        raise SettingsError(f"{_where(key, origins)} must be at least {minimum}, got {value}")
    return value


def _share(merged: dict, key: str, origins: dict[str, str]) -> float:
    value = float(_check(merged, key, (int, float), origins))
    if not 0 <= value <= 1:
        raise SettingsError(f"{_where(key, origins)} is a share between 0 and 1, got {value}")
    return value


def _non_negative(merged: dict, key: str, origins: dict[str, str]) -> float:
    value = float(_check(merged, key, (int, float), origins))
    if value < 0:
        raise SettingsError(f"{_where(key, origins)} must be at least 0, got {value}")
    return value


def _choice(merged: dict, key: str, choices: tuple[str, ...], origins: dict[str, str]) -> str:
    value = _check(merged, key, str, origins)
    if value not in choices:
        raise SettingsError(f"{_where(key, origins)} must be one of {', '.join(choices)}")
    return value


def _strings(merged: dict, key: str, origins: dict[str, str]) -> list[str]:
    value = _check(merged, key, list, origins)
    if not all(isinstance(item, str) for item in value):
        raise SettingsError(f"{_where(key, origins)} must be a list of strings")
    return value


def _check_targets(value: Any, origin: str) -> dict[str, TargetSettings]:
    if not isinstance(value, dict):
        raise SettingsError(f"trnlens.targets (from {origin}) must map names to target fields")
    found: dict[str, TargetSettings] = {}
    for name, fields_ in value.items():
        if not isinstance(fields_, dict):
            raise SettingsError(f"trnlens.targets.{name} (from {origin}) must be a table")
        fields_ = dict(fields_)
        default = "nodes" if "nodes" in fields_ else "ssh" if "host" in fields_ else "local"
        kind = fields_.pop("kind", default)
        if kind not in TARGET_KINDS:
            raise SettingsError(f"trnlens.targets.{name}.kind must be one of local, ssh, nodes")
        python = fields_.pop("python", None)
        if python is not None and not isinstance(python, str):
            raise SettingsError(f"trnlens.targets.{name}.python must be a path")
        env = fields_.pop("env", {}) or {}
        if not isinstance(env, dict):
            raise SettingsError(f"trnlens.targets.{name}.env must be a table")
        found[str(name)] = TargetSettings(
            str(name), kind, python, {str(k): str(v) for k, v in env.items()}, fields_, origin
        )
    return found
