"""The autotuner: pick a spec's `KernelConfig` by measuring.

    affinec tune conv --n 32 --c 64 ... --dtype f16 --layout nhwc --filter-layout rsck
    affinec tune --list                       # what the cache holds
    kernel = affinec.compile(spec)            # uses a cached configuration if any
    kernel = affinec.compile(spec, tune=True) # tunes first if none is cached

The modules, in the order the tuner uses them: `problem` (a spec as an implicit
GEMM, a configuration's geometry), `space` (the candidates), `cost` (the model that
ranks them without a GPU), `compiling` (in parallel processes), `measure` (checked,
then timed on the GPU; pluggable), `tuner` (the whole search), `tune_result`
(its records and report), `cache` (the JSON file of the best configurations),
`cached` (compiling with the cached configuration), `plots` (PNG, with matplotlib); `many` (a network's
specs in one budget), `distributed` (a zoo over a Ray cluster, `affinec tune
--ray`; its parts `ray_workers`, `ray_driver`, `zoo_steps`, `journal`,
`zoo_results`) and `model_measure` (the cost model's times where there is no GPU). This is a
tool-level package: it builds on the compiler, the runtime and the benchmark, and
only the command line and `affinec.compile` build on it.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "CacheError": "affinec.tuning.cache",
    "Entry": "affinec.tuning.cache",
    "TuningCache": "affinec.tuning.cache",
    "compiler_version": "affinec.tuning.cache",
    "default_path": "affinec.tuning.cache",
    "cached_entry": "affinec.tuning.cached",
    "compile_cached": "affinec.tuning.cached",
    "entry_of": "affinec.tuning.cached",
    "tune_and_store": "affinec.tuning.cached",
    "write_log": "affinec.tuning.log",
    "GpuMeasurer": "affinec.tuning.measure",
    "Measurement": "affinec.tuning.measure",
    "Measurer": "affinec.tuning.measure",
    "NotTunable": "affinec.tuning.problem",
    "search_space": "affinec.tuning.space",
    "TuneOptions": "affinec.tuning.tuner",
    "TuneResult": "affinec.tuning.tune_result",
    "tune": "affinec.tuning.tuner",
}
"""The package's names and their modules. As `affinec`'s, they are imported on
first use: the modules build on the compiler, the runtime and numpy, which the
command line's `affinec gen`, `affinec compile` and `--help` do without."""

MAX_CANDIDATES = 200
"""The most configurations the search space offers a spec (`search_space`); here,
not in `space`, so that the command line's `tune` flags show it without loading
the tuner."""

__all__ = [*_EXPORTS, "MAX_CANDIDATES"]


def __getattr__(name: str) -> Any:
    import importlib

    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # the next use finds it without this hook
        return value
    raise AttributeError(f"module 'affinec.tuning' has no attribute {name!r}")
