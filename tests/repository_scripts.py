"""The repository's scripts and benchmarks (not part of the package) as modules, for
the tests that call their functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(relative: str) -> ModuleType:
    """The module of the file at `relative` (to the repository's root), run as the
    script's own directory would see it: its siblings importable (the benchmarks'
    `machine.py`)."""
    path = ROOT / relative
    folder = str(path.parent)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # registered as an import would be: its dataclasses look their module up there
    sys.modules[spec.name] = module
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module
