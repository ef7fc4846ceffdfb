"""The agent's main loop: where a cancel's interrupt may land without costing the process."""

from __future__ import annotations

from trnlens.agent import main


def interrupt_in(filename: str, module: str = "somewhere") -> KeyboardInterrupt:
    """A KeyboardInterrupt raised in code that claims to live in ``filename``/``module``."""
    namespace = {"__name__": module}
    exec(compile("def f():\n    raise KeyboardInterrupt\n", filename, "exec"), namespace)
    try:
        namespace["f"]()
    except KeyboardInterrupt as exc:
        return exc
    raise AssertionError("no interrupt")


def test_an_interrupt_in_project_code_or_the_agent_keeps_the_process(tmp_path):
    request = {"project_root": str(tmp_path)}
    assert main.interrupted_safely(interrupt_in(str(tmp_path / "model.py")), request)
    own = interrupt_in("/anywhere/measure.py", module=f"{main._PACKAGE}.measure")
    assert main.interrupted_safely(own, request)


def test_an_interrupt_inside_an_import_or_a_library_asks_for_a_fresh_process(tmp_path):
    request = {"project_root": str(tmp_path)}
    venv_torch = tmp_path / ".venv" / "lib" / "python3.12" / "site-packages" / "torch" / "x.py"
    for where in ("<frozen importlib._bootstrap>", str(venv_torch), "/usr/lib/python3/json.py"):
        assert not main.interrupted_safely(interrupt_in(where), request), where
