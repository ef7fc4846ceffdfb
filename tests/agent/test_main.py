"""The agent's main loop: where a cancel's interrupt may land without costing the process."""

from __future__ import annotations

import importlib
import sys

import pytest
from trnlens.agent import main


def interrupt_in_function(filename: str) -> KeyboardInterrupt:
    """A KeyboardInterrupt raised in a function that claims to live in ``filename``."""
    namespace: dict = {}
    exec(compile("def f():\n    raise KeyboardInterrupt\n", filename, "exec"), namespace)
    try:
        namespace["f"]()
    except KeyboardInterrupt as exc:
        return exc
    raise AssertionError("no interrupt")


def interrupt_while_importing(folder, name: str) -> KeyboardInterrupt:
    """A KeyboardInterrupt in the top-level code of module ``name``, imported from ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text("import sys\nraise KeyboardInterrupt\n")
    sys.path.insert(0, str(folder))
    try:
        importlib.import_module(name)
    except KeyboardInterrupt as exc:
        return exc
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(name, None)
    raise AssertionError("no interrupt")


@pytest.fixture
def request_(tmp_path):
    return {"project_root": str(tmp_path / "project")}


def test_an_interrupt_in_running_code_keeps_the_process(tmp_path, request_):
    project_file = str(tmp_path / "project" / "model.py")
    library = str(tmp_path / "venv" / "site-packages" / "torch" / "functional.py")
    for where in (project_file, library, "/usr/lib/python3/json/decoder.py"):
        assert main.interrupted_safely(interrupt_in_function(where), request_), where


def test_an_interrupt_while_the_project_imports_its_own_module_keeps_the_process(
    tmp_path, request_
):
    exc = interrupt_while_importing(tmp_path / "project", "trnlens_test_project_module")
    assert main.interrupted_safely(exc, request_)


def test_an_interrupt_while_a_library_is_imported_asks_for_a_fresh_process(tmp_path, request_):
    site = tmp_path / "project" / ".venv" / "lib" / "site-packages"  # a venv inside the project
    exc = interrupt_while_importing(site, "trnlens_test_half_imported")
    assert not main.interrupted_safely(exc, request_)
    outside = interrupt_while_importing(tmp_path / "elsewhere", "trnlens_test_elsewhere")
    assert not main.interrupted_safely(outside, request_)


def test_the_agent_skips_the_interpreter_teardown_only_without_children():
    """_quick_exit ends a finished agent at once unless a child of it still runs (a compile
    worker, a DataLoader worker), whose owner's exit handler must reap it."""
    import subprocess
    import sys

    from trnlens.agent.main import _has_children

    alone = subprocess.run(
        [sys.executable, "-c", "from trnlens.agent.main import _has_children as h; print(h())"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert alone.stdout.strip() == "False"
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert _has_children()
    finally:
        child.kill()
        child.wait()
