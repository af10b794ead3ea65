#!/usr/bin/env bash
# Run Python with affinec importable, on a GPU machine without network.
#
# With a .venv (a machine with network, `make` made it), that venv's Python is used.
# Otherwise the machine's own python3 (which has numba, numba-cuda, numpy, torch) is
# used, and what it lacks is installed without an index: xdsl and its dependencies from
# the wheels scripts/fetch_wheels.sh put in .whl/, and affinec itself in editable mode.
# numba, numba-cuda and numpy are never installed here: the machine's own are used.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/python ]; then
  exec .venv/bin/python "$@"
fi
if ! python3 -c "import xdsl" 2>/dev/null; then
  python3 -m pip install --quiet --no-index --no-deps --no-cache-dir .whl/*.whl
fi
# The editable install maps affinec.passes and affinec.dialects (folders outside
# affinec/) to the tree installed last: install this tree's when another's is.
installed=$(python3 -c "import affinec.passes as p, os; print(os.path.dirname(p.__file__))" 2>/dev/null || true)
if [ "$installed" != "$PWD/passes" ]; then
  python3 -m pip install --quiet --no-index --no-deps --no-build-isolation -e .
fi
# This tree's affinec first: the editable install may be another copy's (two trees
# run on one machine import the first one installed, even from a script's folder).
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec python3 "$@"
