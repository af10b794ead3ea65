#!/usr/bin/env bash
# Check the layering contract of pyproject.toml ([tool.importlinter]) with
# import-linter. `dialects/` and `passes/` are installed as `affinec.dialects` and
# `affinec.passes` (setuptools package-dir), which import-linter cannot follow, so the
# package is assembled as it is installed in a temporary folder and checked there.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
cp -r "$here/affinec" "$tree/affinec"
cp -r "$here/dialects" "$tree/affinec/dialects"
cp -r "$here/passes" "$tree/affinec/passes"
find "$tree" -name __pycache__ -prune -exec rm -rf {} +
cd "$tree"
PYTHONPATH="$tree" lint-imports --config "$here/pyproject.toml" --no-cache
