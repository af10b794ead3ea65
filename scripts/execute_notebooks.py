"""Execute the notebooks under notebooks/ in a fresh kernel each and store them with
their outputs (text and pictures), so they read without running them:
`make notebooks`. The tests check that they are stored executed and still run."""

from __future__ import annotations

import argparse
from pathlib import Path

import nbclient
import nbformat

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def execute(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    nbformat.write(notebook, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split(":")[0])
    parser.add_argument(
        "notebooks", nargs="*", type=Path, help="the notebooks (default: all of them)"
    )
    args = parser.parse_args()
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    for path in paths:
        if not path.is_file():
            parser.error(f"no notebook at {path}")
    for path in paths:
        print(f"executing {path.name}", flush=True)
        execute(path)


if __name__ == "__main__":
    main()
