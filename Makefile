# The two commands a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What is installed: the core (the compiler, the command lines, the interpreter) for
# `make demo`, the `dev` extra (torch's CPU build, hypothesis, the linters) for the rest.
CORE := $(VENV)/.installed-core
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
# Python caches what it compiles (__pycache__) unless PYTHONDONTWRITEBYTECODE is set,
# as some sandboxes and CI images set it: then every process (each lit RUN line,
# each command-line test, each notebook's kernel) compiled xDSL, numpy and affinec
# from source again, 1.6-1.9 s against 0.6 s for `affinec-opt --help`.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test lint pytest lit docs notebooks gpu-test gpu-sanitize bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# --no-compile: Python compiles what the tools import when they first import it,
# rather than pip all of torch and the rest up front (20 s of a fresh `make test`).
$(CORE): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --no-compile -e .
	touch $(CORE)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --no-compile -e '.[dev]'
	touch $(STAMP) $(CORE)

demo: $(CORE)
	$(BIN)/affinec demo

# One after the other: pytest and lit side by side (make -j2) measured slower on the
# 2-core machine (5 min 47 s against 5 min 14 s), each fighting the other for cores.
test: lint pytest lit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PATH="$(CURDIR)/$(BIN):$$PATH" scripts/check_layers.sh

# --dist loadgroup: the tests that share a module's fixture (a Ray cluster, a tuning)
# run on one worker, which builds it once (tests/conftest.py groups them).
pytest: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/pytest -q -n auto --dist loadgroup

lit: $(STAMP)
	$(BIN)/lit -sv tests/filecheck

# The API reference from the docstrings, into docs/api (the tests build it too).
docs: $(STAMP)
	$(BIN)/python scripts/build_api_docs.py --out docs/api

# The notebooks executed and stored with their outputs (the tests check they are).
notebooks: $(STAMP)
	$(BIN)/python scripts/execute_notebooks.py

# On a machine with a CUDA GPU: the tests marked `gpu` (skipped elsewhere). Works
# without network too (the H100 machines): see scripts/gpu_python.sh.
gpu-test:
	scripts/gpu_python.sh -m pytest -q -m gpu tests

# compute-sanitizer memcheck and racecheck over a subset of the GPU test matrix
# (logs under $OUT, default /tmp/affinec-gpu).
gpu-sanitize:
	scripts/gpu_session.sh sanitize

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
