"""Build affinec's API reference from its docstrings with pdoc.

    .venv/bin/python scripts/build_api_docs.py [--out docs/api]

Writes HTML pages (not committed: `make docs` rebuilds them, and the test suite
builds them into a temporary folder so they cannot rot) for the modules a user
calls: the package's names, the specs and the frontend, the compiler, the
configurations and pipelines, the passes with their options, the runtime, the
interpreter and the checker, the testing helpers, the tuner, the PyTorch front door
and the networks.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

PUBLIC_MODULES = (
    "affinec",
    "affinec.base.spec",
    "affinec.frontend.naive",
    "affinec.driver.compiler",
    "affinec.driver.config",
    "affinec.driver.pipeline",
    "affinec.driver.pipelines",
    "affinec.driver.pipeline_names",
    "affinec.passes",
    "affinec.backend.runtime",
    "affinec.interpreter",
    "affinec.driver.checking",
    "affinec.frontend.reference",
    "affinec.testing",
    "affinec.tuning",
    "affinec.hardware.chips",
    "affinec.frontend.networks",
    "affinec.torch",
    "affinec.torch.networks",
)


def build(out: Path) -> list[str]:
    """Write the pages into `out`; return pdoc's warnings (an import that fails is
    one: the reference would miss a module)."""
    import pdoc

    import affinec

    for name in affinec.__all__:  # resolve the package's lazily imported names
        getattr(affinec, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*PUBLIC_MODULES, output_directory=out)
    return [str(w.message) for w in caught]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/api"))
    args = parser.parse_args()
    for message in build(args.out):
        print(f"pdoc: {message.splitlines()[0]}", file=sys.stderr)
    print(f"wrote {args.out}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
