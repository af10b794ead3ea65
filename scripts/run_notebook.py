"""Run a notebook's code cells as one script, for machines without Jupyter (the GPU
machines): `scripts/gpu_python.sh scripts/run_notebook.py notebooks/03_to_the_gpu.ipynb`.

Cells run in order in one namespace, from the notebook's folder, as a kernel would
run them; `IPython.display` is stubbed to print what it would show.
"""

import argparse
import json
import os
import sys
import types
from pathlib import Path


def _stub_ipython_display() -> None:
    if "IPython" in sys.modules:
        return
    try:
        import IPython  # noqa: F401
    except ImportError:
        display = types.ModuleType("IPython.display")
        display.SVG = lambda text: f"<SVG, {len(text)} characters>"
        display.display = print
        package = types.ModuleType("IPython")
        package.display = display
        # matplotlib asks which IPython runs it, and whether it runs at all: none
        package.get_ipython = lambda: None
        package.version_info = (0, 0)
        sys.modules["IPython"] = package
        sys.modules["IPython.display"] = display


def main(path: str) -> None:
    notebook = json.loads(Path(path).read_text())
    os.chdir(Path(path).parent)
    _stub_ipython_display()
    namespace: dict = {"__name__": "__main__"}
    for k, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        print(f"# ---- cell {k}", flush=True)
        exec(compile(source, f"{path}:cell{k}", "exec"), namespace)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split(":")[0])
    parser.add_argument("notebook", type=Path)
    args = parser.parse_args()
    if not args.notebook.is_file():
        parser.error(f"no notebook at {args.notebook}")
    main(str(args.notebook))
