"""Every notebook under notebooks/ is stored executed (its outputs and pictures
readable without running it; `make notebooks` refreshes them) and still runs top to
bottom in a fresh kernel.
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
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code), (
        f"{path.name} is not stored executed: `make notebooks`"
    )
    assert not any(
        output.get("output_type") == "error" for cell in code for output in cell.outputs
    ), f"{path.name} is stored with an error"
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()


def test_notebooks_exist():
    assert NOTEBOOKS, "no notebooks found"
