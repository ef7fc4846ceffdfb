"""Tests that need a system component (sshd, network namespaces, nvim, root): skipped where it
is missing, except in CI (``CI`` set), where nothing may be skipped for want of one: there the
test fails and says what is missing (CI installs everything and runs as root)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

MARK = "needs_component"


def needs(missing: str | None) -> pytest.MarkDecorator:
    """A mark: ``missing`` is why the test cannot run here (None when it can)."""
    return getattr(pytest.mark, MARK)(missing)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def check(item: pytest.Item) -> None:
    """Skips or fails ``item`` (pytest_runtest_setup) when a component it needs is missing."""
    for mark in item.iter_markers(MARK):
        missing = mark.args[0] if mark.args else None
        if missing:
            absent(missing)


def absent(missing: str) -> NoReturn:
    """For a test that finds out as it runs that a component is missing (a browser, bind
    mounts): skips it here, fails it in CI, saying what is missing."""
    if in_ci():
        pytest.fail(f"{missing}: in CI nothing is skipped for want of a component")
    pytest.skip(missing)
