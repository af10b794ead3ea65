# lit configuration for affinec's FileCheck tests: `lit -sv tests/filecheck`.
# `affinec-opt`, `affinec` and `filecheck` must be on PATH (the Makefile puts .venv/bin
# there).
import os

import lit.formats

config.name = "affinec"  # noqa: F821
config.test_format = lit.formats.ShTest()  # noqa: F821
config.suffixes = [".mlir", ".test"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["lit.cfg.py", "inputs"]  # noqa: F821
for name in ("PATH", "HOME", "HYPOTHESIS_PROFILE"):
    if name in os.environ:
        config.environment[name] = os.environ[name]  # noqa: F821
