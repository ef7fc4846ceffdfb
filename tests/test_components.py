"""A test needing a missing component is skipped on a workstation and fails in CI."""

from __future__ import annotations

import pytest

from tests import components


class Item:
    def __init__(self, *marks: pytest.MarkDecorator):
        self.marks = [m.mark for m in marks]

    def iter_markers(self, name: str):
        return (m for m in self.marks if m.name == name)


def test_missing_is_a_skip_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs sshd"):
        components.check(Item(components.needs("needs sshd")))


@pytest.mark.parametrize("value", ["true", "1", "yes"])
def test_missing_is_a_failure_in_ci(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="needs sshd: in CI nothing is skipped"):
        components.check(Item(components.needs("needs sshd")))


def test_present_runs_everywhere(monkeypatch):
    monkeypatch.setenv("CI", "true")
    components.check(Item(components.needs(None)))
    monkeypatch.setenv("CI", "false")
    components.check(Item())


def test_found_missing_while_running_is_a_skip_here_and_a_failure_in_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no browser"):
        components.absent("no browser")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no browser: in CI nothing is skipped"):
        components.absent("no browser")
