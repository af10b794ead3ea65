"""The autotuner: pick a spec's `KernelConfig` by measuring.

    affinec tune conv --n 32 --c 64 ... --dtype f16 --layout nhwc --filter-layout rsck
    affinec tune --list                       # what the cache holds
    kernel = affinec.compile(spec)            # uses a cached configuration if any
    kernel = affinec.compile(spec, tune=True) # tunes first if none is cached

The modules, in the order the tuner uses them: `problem` (a spec as an implicit
GEMM, a configuration's geometry), `space` (the candidates), `cost` (the model that
ranks them without a GPU), `compiling` (in parallel processes), `measure` (checked,
then timed on the GPU; pluggable), `tuner` (the whole search, its records and
report), `cache` (the JSON file of the best configurations), `cached` (compiling
with the cached configuration), `plots` (PNG, with matplotlib). This is a
tool-level package: it builds on the compiler, the runtime and the benchmark, and
only the command line and `affinec.compile` build on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from affinec.tuning.cache import (
        CacheError,
        Entry,
        TuningCache,
        compiler_version,
        default_path,
    )
    from affinec.tuning.cached import (
        cached_entry,
        compile_cached,
        entry_of,
        tune_and_store,
    )
    from affinec.tuning.log import write_log
    from affinec.tuning.measure import GpuMeasurer, Measurement, Measurer
    from affinec.tuning.problem import NotTunable
    from affinec.tuning.space import search_space
    from affinec.tuning.tuner import TuneOptions, TuneResult, tune

__all__ = [
    "CacheError",
    "Entry",
    "GpuMeasurer",
    "Measurement",
    "Measurer",
    "NotTunable",
    "TuneOptions",
    "TuneResult",
    "TuningCache",
    "cached_entry",
    "compile_cached",
    "compiler_version",
    "default_path",
    "entry_of",
    "search_space",
    "tune",
    "tune_and_store",
    "write_log",
]


def __getattr__(name: str) -> Any:
    """The package's names (above), from their modules when one is first asked
    for: the modules build on the compiler, the runtime and numpy, which the
    command line's `affinec gen` and `--help` (whose `tune` flags read `space`) do
    without."""
    if name not in __all__:
        raise AttributeError(f"module 'affinec.tuning' has no attribute {name!r}")
    from affinec.tuning import cache, cached, log, measure, problem, space, tuner

    for module in (cache, cached, log, measure, problem, space, tuner):
        if name in vars(module):
            globals()[name] = value = vars(module)[name]
            return value
    raise AssertionError(f"affinec.tuning.{name} is in __all__ but in no module")
