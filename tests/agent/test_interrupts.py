"""A cancel's interrupt: held back out of a library's import, delivered right after it."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import time

import pytest
from trnlens.agent import interrupts, main
from trnlens.agent.interrupts import Interrupter

SLOW_MODULE = "import time\nfor _ in range({n}):\n    time.sleep(0.01)\nDONE = True\n"


@pytest.fixture
def interrupter():
    previous = signal.getsignal(signal.SIGINT)
    it = Interrupter()
    it.install()
    yield it
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def site(tmp_path):
    """A library folder, as an installed package's would be, on sys.path for the test."""
    folder = tmp_path / "venv" / "lib" / "site-packages"
    folder.mkdir(parents=True)
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))
    for name in [name for name in sys.modules if name.startswith("trnlens_slowlib")]:
        del sys.modules[name]


def run_until_interrupted(interrupter, root, module: str) -> tuple[KeyboardInterrupt, float]:
    """Imports ``module`` and then spins in a user-code loop; a cancel arrives 50 ms in."""
    started = time.monotonic()
    threading.Timer(0.05, interrupter.cancel).start()
    try:
        with interrupter.running(str(root)):
            importlib.import_module(module)
            while True:
                time.sleep(0.005)
    except KeyboardInterrupt as exc:
        return exc, time.monotonic() - started
    raise AssertionError("not interrupted")


def test_a_cancel_during_a_library_import_lands_once_the_import_is_done(
    interrupter, site, tmp_path
):
    (site / "trnlens_slowlib_short.py").write_text(SLOW_MODULE.format(n=20))  # 0.2 s
    exc, _ = run_until_interrupted(interrupter, tmp_path / "project", "trnlens_slowlib_short")
    assert sys.modules["trnlens_slowlib_short"].DONE  # imported whole
    assert interrupter.held_back > 0
    assert main.interrupted_safely(exc, {"project_root": str(tmp_path / "project")})


def test_an_import_that_outlasts_the_hold_back_is_interrupted_anyway(interrupter, site, tmp_path):
    (site / "trnlens_slowlib_hangs.py").write_text(SLOW_MODULE.format(n=1000))  # 10 s
    exc, _ = run_until_interrupted(interrupter, tmp_path / "project", "trnlens_slowlib_hangs")
    assert interrupter.held_back > 0  # held back first, then forced (FORCE_AFTER_S)
    # interrupted inside its 10 s import: the import failed, visibly
    assert "trnlens_slowlib_hangs" not in sys.modules
    assert not main.interrupted_safely(exc, {"project_root": str(tmp_path / "project")})


def test_a_cancel_in_user_code_lands_at_once(interrupter, tmp_path):
    started = time.monotonic()
    threading.Timer(0.05, interrupter.cancel).start()
    with pytest.raises(KeyboardInterrupt):
        with interrupter.running(str(tmp_path)):
            while time.monotonic() - started < 5:
                time.sleep(0.005)
    assert interrupter.held_back == 0  # the first interrupt landed: nothing was held back


def test_repeats_after_the_interrupt_landed_do_nothing_and_a_real_ctrl_c_still_stops(
    interrupter, tmp_path
):
    with interrupter.running(str(tmp_path)):
        with pytest.raises(KeyboardInterrupt):
            threading.Thread(target=interrupter.cancel).start()  # as from the agent's reader
            for _ in range(1000):
                time.sleep(0.001)
        # A late repeat of the same cancel (what the repeating thread's interrupt_main() makes
        # of it): raise_signal runs the handler before it returns, so no wait is needed.
        signal.raise_signal(signal.SIGINT)  # handled here, silently
    fresh = Interrupter()
    fresh.install()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)


def test_without_the_handler_a_cancel_interrupts_at_once(tmp_path):
    it = Interrupter()  # not installed: Python's own handler
    with pytest.raises(KeyboardInterrupt):
        with it.running(str(tmp_path)):
            it.cancel()
            time.sleep(1)


def test_what_counts_as_breaking(tmp_path):
    root = str(tmp_path / "project")

    def code(filename, name="<module>"):
        return compile("pass", filename, "exec").replace(co_name=name)

    project_module = code(f"{root}/model.py")
    library_module = code(str(tmp_path / "venv/site-packages/lib.py"))
    inside_venv = code(f"{root}/.venv/lib/site-packages/lib.py")
    loader = code("<frozen importlib._bootstrap>", "_find_and_load")
    function = code(str(tmp_path / "venv/site-packages/lib.py"), "f")
    assert not interrupts.stop_would_break([project_module, function], root)
    assert interrupts.stop_would_break([library_module, function], root)
    assert interrupts.stop_would_break([inside_venv], root)
    assert interrupts.stop_would_break([function, loader], root)
    assert not interrupts.stop_would_break([loader, function], root)
    assert not interrupts.stop_would_break([], root)
