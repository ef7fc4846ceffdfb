"""The server's view of settings: the client's layers, each project's pyproject, and trust.

A document's settings come from its project root (each root may have its own pyproject.toml);
the client's ``initializationOptions`` and ``workspace/configuration`` apply to all roots, and a
target chosen with ``trnlens.server.selectTarget`` wins over everything for this session, until
``trnlens.target`` itself changes (the latest choice wins).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from trnlens import settings as settings_
from trnlens.settings import Layer, Settings, SettingsError

log = logging.getLogger(__name__)


class Config:
    """Read by the loop and by the file watcher's thread (settings of the files it analyses):
    the caches below change under ``_lock``, and readers get copies."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.trusted = True
        self.initialization = Layer("initializationOptions", {})
        self.client = Layer("workspace/configuration", {})
        self.session_target: str | None = None
        self._pyproject: dict[Path, tuple[float, Layer]] = {}
        self.problems: dict[Path, str] = {}  # root -> the last settings error there

    def set_initialization_options(self, options: Any) -> None:
        options = options if isinstance(options, dict) else {}
        # Clients that say nothing are trusted; only an explicit `false` restricts.
        self.trusted = options.get("trusted", True) is not False
        self.initialization = settings_.client_layer(options, "initializationOptions")

    def set_client_configuration(self, values: Any) -> None:
        layer = settings_.client_layer(values, "workspace/configuration")
        if layer.values.get("target") != self.client.values.get("target"):
            # trnlens.target changed after a target was picked for the session: the newer
            # choice wins, so the lens, the run and the status bar (which shows the setting)
            # name the same target (issue 42)
            self.session_target = None
        self.client = layer

    def pyproject(self, root: Path) -> Layer:
        with self._lock:
            return self._pyproject_layer(root)

    def _pyproject_layer(self, root: Path) -> Layer:
        path = root / "pyproject.toml"
        try:
            mtime = path.stat().st_mtime
        except OSError:
            mtime = -1.0
        cached = self._pyproject.get(root)
        if cached is None or cached[0] != mtime:
            cached = (mtime, settings_.pyproject_layer(root))
            self._pyproject[root] = cached
        return cached[1]

    def layers(self, root: Path) -> list[Layer]:
        layers = [self.pyproject(root), self.initialization, self.client]
        if self.session_target is not None:
            layers.append(Layer("selectTarget", {"target": self.session_target}))
        return layers

    def resolve(self, root: Path) -> Settings:
        """Raises SettingsError: for commands, where the user must hear what is wrong."""
        return settings_.resolve(self.layers(root), trusted=self.trusted)

    def settings_for(self, root: Path) -> Settings:
        """Never raises: lenses and hints fall back to the defaults and remember the problem."""
        with self._lock:
            return self._settings_for(root)

    def problem_items(self) -> list[tuple[Path, str]]:
        """(root, the last settings error there), a copy the watcher's thread cannot change."""
        with self._lock:
            return list(self.problems.items())

    def _settings_for(self, root: Path) -> Settings:
        try:
            found = self.resolve(root)
        except SettingsError as exc:
            if self.problems.get(root) != str(exc):
                log.warning("settings for %s: %s", root, exc)
            self.problems[root] = str(exc)
            return settings_.resolve([], trusted=self.trusted)
        self.problems.pop(root, None)
        return found
