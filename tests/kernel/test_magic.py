"""The ``%trnlens`` magics in a real Jupyter kernel (ipykernel, run by nbclient): a model built in
an earlier cell profiled in place, the compact table in the cell's output, the run stored, and
the language server then showing it on that notebook's cells."""

from __future__ import annotations

import asyncio

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat import v4

from tests.lsp.session import editor, workspace
from tests.lsp.test_e2e_notebook import open_notebook

FAST = "--steps 2 --warmup 1 --repeats 3 --notebook nb.ipynb"
MODEL = """class Block(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
"""
NAIVE_LINE = 7  # 1-based line of the naive RMSNorm in the model's cell


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """The kernel's own folders (history, connection files) in the test's temporary folder."""
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))


def notebook(root, *sources: str) -> nbformat.NotebookNode:
    nb = v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "language": "python", "display_name": "P"}}
    nb.cells = [v4.new_code_cell(s, id=f"c{i}") for i, s in enumerate(sources)]
    nbformat.write(nb, root / "nb.ipynb")
    return nb


def execute(root, nb) -> nbformat.NotebookNode:
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(root)}})  # fmt: skip
    return client.execute()


def output(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


async def test_the_magic_profiles_a_model_from_an_earlier_cell_and_the_editor_shows_it(
    tmp_path, kernel_env
):
    root = workspace(tmp_path)
    nb = notebook(
        root,
        "import torch\nfrom torch import nn",
        MODEL,
        "model = Block()\nx = torch.randn(8, 64, 256)",
        "%load_ext trnlens",
        f"%trnlens profile {FAST} model(x)",
        f"%%trnlens {FAST}\ny = model(x)\ntotal = y.sum()",
    )
    # The notebook is open in the editor while its kernel runs: the run the magic stores is
    # picked up from the project's store and shown on the model's cell.
    async with editor(root) as ed:
        uris = open_notebook(ed)
        model_cell = uris["c1"]
        lenses = await ed.lenses(model_cell)
        assert "dispatches" not in lenses["Block"].command.title  # nothing measured yet

        done = await asyncio.to_thread(execute, root, nb)
        table = output(done.cells[4])
        assert "trnlens · nb.ipynb::Block" in table, table
        assert "6 dispatches/step" in table  # the naive RMSNorm in the model's forward
        assert f"nb.ipynb:cell 2:{NAIVE_LINE} " in table and "torch.rsqrt" in table
        assert "stored in .trnlens/" in table
        cell_table = output(done.cells[5])
        assert "7 dispatches/step" in cell_table, cell_table  # the model's six and the sum
        assert f"nb.ipynb:cell 2:{NAIVE_LINE} " in cell_table
        assert "nb.ipynb:cell 6:3 " in cell_table

        async def figures():
            hints = await ed.hints(model_cell)
            return [h for h in hints if h.position.line == NAIVE_LINE - 1]

        await ed.watcher_settled()
        found = await figures()
        # two runs measured the line (the magic's and the %%trnlens cell's): within VS Code's 43
        # characters the hint names each with its share, the figures are in its tooltip
        assert found and "Block: 100%" in str(found[0].label), found
        assert "6 dispatches" in str(found[0].tooltip), found
        lenses = await ed.lenses(model_cell)
        assert "6 dispatches" in lenses["Block"].command.title


SLOW = """def slow(x):
    print("called", flush=True)
    for _ in range(50):
        x = torch.tanh(x @ x)
    return x
"""


def test_interrupting_the_kernel_stops_the_run_and_stores_nothing(tmp_path, kernel_env):
    from jupyter_client.manager import start_new_kernel

    root = workspace(tmp_path)
    notebook(root, "import torch", SLOW)
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(root))
    try:

        def run(code: str, on_output=None, timeout: float = 300) -> str:
            seen: list[str] = []

            def hook(message):
                text = message["content"].get("text")
                if message["msg_type"] == "stream" and text:
                    seen.append(text)
                    if on_output is not None:
                        on_output("".join(seen))

            kc.execute_interactive(code, output_hook=hook, timeout=timeout)
            return "".join(seen)

        run("import torch\n" + SLOW + "x = torch.randn(256, 256) / 16\n%load_ext trnlens")
        interrupted = []

        def interrupt_once_measuring(text: str) -> None:
            # the profiled function printed: the run is under way (warm-up or measured steps)
            if "called" in text and not interrupted:
                interrupted.append(True)
                km.interrupt_kernel()

        text = run(
            "%trnlens profile --steps 100000 --warmup 1 --notebook nb.ipynb slow(x)",
            interrupt_once_measuring,
        )
        assert interrupted and "interrupted; the run stopped and nothing was stored" in text
        assert not (root / ".trnlens" / "artifacts").exists() or not any(
            (root / ".trnlens" / "artifacts").iterdir()
        )
        # The kernel goes on, and a profiler can start again: the interrupted one was stopped.
        after = run("%trnlens profile --steps 1 --warmup 1 --repeats 1 --notebook nb.ipynb slow(x)")
        assert "dispatches/step" in after and "stored in .trnlens/" in after, after
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
