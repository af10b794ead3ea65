"""Every notebook under notebooks/ runs top to bottom in a fresh kernel.

Notebooks are stored without outputs; this executes them the way a reader would.
"""

from pathlib import Path

import pytest

# Jupyter is a development dependency; the GPU machines have none (there,
# scripts/run_notebook.py runs a notebook's code cells as a script instead).
nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path):
    notebook = nbformat.read(path, as_version=4)
    assert all(
        not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"
    ), f"{path.name} is stored with outputs"
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()


def test_notebooks_exist():
    assert NOTEBOOKS, "no notebooks found"
