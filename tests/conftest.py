"""Fixtures every test folder may use."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import configuration as hypothesis_configuration
from hypothesis import settings

from tests import components, hygiene

# Hypothesis keeps no example database (a .hypothesis/ folder in the checkout): the fuzz tests
# are derandomized and bounded instead, the same inputs on every run.
settings.register_profile("trnlens", database=None)
settings.load_profile("trnlens")

# A suite started as a background job of a shell without job control inherits SIGINT ignored, and
# Python then installs no KeyboardInterrupt handler, in itself or in the CLIs and agents it starts
# (an ignored signal stays ignored across exec). The Ctrl-C and cancel tests need what a terminal
# gives: Python's own handler here, and so the default disposition in every child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def make_project(tmp_path: Path):
    """Writes {relative path: source} under a fresh project root and returns the root."""

    def make(files: dict[str, str]) -> Path:
        for relative, text in files.items():
            path = tmp_path / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return tmp_path

    return make


def python_without_trnlens(directory: Path, with_torch: bool = True) -> Path:
    """A venv that sees torch (through a .pth to our site-packages) but not trnlens.

    Paths a .pth file adds are not site directories, so the editable install's own .pth in our
    site-packages is not processed there: `import trnlens` fails, `import torch` works.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True)
    python = directory / "bin" / "python"
    if with_torch:
        site = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        Path(site, "torch-only.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


# -- hygiene: the whole session runs with a private temporary directory, and whatever of trnlens
# is left in it, or still running, when the session ends fails the run (issue 13). A private
# directory rather than /tmp itself: other sessions on the machine create their own entries.
SESSION_MARK = "TRNLENS_TEST_SESSION"


def pytest_runtest_setup(item) -> None:
    components.check(item)  # a missing sshd, netns, nvim: skipped here, a failure in CI


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", f"{components.MARK}(missing): see tests/components.py")
    if hasattr(config, "workerinput") or os.environ.get(SESSION_MARK):
        return  # a nested pytest (tests that run pytest) shares the outer session's checks
    # Short: unix socket paths under it (ssh control sockets, warm daemons) must stay < 108 bytes.
    directory = Path(tempfile.mkdtemp(prefix="tl-"))
    config._trnlens_session_tmp = directory  # noqa: SLF001 (read in pytest_sessionfinish)
    os.environ[SESSION_MARK] = str(directory)
    os.environ["TMPDIR"] = str(directory)
    # torch.compile's cache goes there too (the default is a torchinductor_<user> in /tmp)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(directory / "torchinductor"))
    tempfile.tempdir = str(directory)
    # and trnlens's own cache (agent bundles, the check cache, ssh control and warm sockets),
    # which would otherwise grow in the user's ~/.cache with every run of the suite
    os.environ["XDG_CACHE_HOME"] = str(directory / hygiene.CACHE)
    # hypothesis's own caches (not its example database, which is off) go there too
    hypothesis_configuration.set_hypothesis_home_dir(directory / "hypothesis")


def pytest_sessionfinish(session, exitstatus) -> None:
    directory = getattr(session.config, "_trnlens_session_tmp", None)
    if directory is None:
        return
    tempfile.tempdir = None
    problems = hygiene.leftovers(directory, SESSION_MARK)
    if problems:  # named in the summary, then removed: a leaky run must not leak itself
        session.config._trnlens_leftovers = problems  # noqa: SLF001
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        hygiene.kill_processes(problems.processes)
    shutil.rmtree(directory, ignore_errors=True)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    problems = getattr(config, "_trnlens_leftovers", None)
    if problems:
        terminalreporter.section("trnlens leftovers (issue 13: tests leave nothing behind)")
        terminalreporter.line(problems.describe())
