"""Compiling with the tuned configuration: a tuning's best as a cache entry, a spec
tuned into the cache, and a compile that takes the cached configuration when there
is one (what `affinec.compile` and `affinec run` use)."""

from __future__ import annotations

import math
import time
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from affinec.base.spec import Spec, not_a_spec
from affinec.driver.compiler import CompiledKernel, compile_to_ptx
from affinec.tuning.cache import Entry, TuningCache, compiler_version, tuning_key
from affinec.tuning.log import write_log
from affinec.tuning.measure import GpuMeasurer, Measurer
from affinec.tuning.tune_result import TuneResult
from affinec.tuning.tuner import TuneOptions, tune


def entry_of(result: TuneResult) -> Entry | None:
    """The cache entry for the best configuration of `result` (None if nothing
    measured was right)."""
    best = result.best
    if best is None or best.ms is None:
        return None
    baseline = result.baseline
    return Entry(
        spec=tuning_key(result.spec),
        gpu=result.gpu,
        compiler=compiler_version(),
        arch=result.arch,
        config=best.config,
        ms=best.ms,
        baseline_ms=baseline.ms if baseline else None,
        error=best.error,
        tuned_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
        measured=len(result.measured),
        cudnn_ms=result.cudnn_ms,
    )


def tune_and_store(
    spec: Spec,
    options: TuneOptions,
    cache: TuningCache,
    measurer: Measurer | None = None,
    log: str | Path | None = None,
) -> TuneResult:
    """Tune `spec` on this machine's GPU (or with `measurer`), store the best in
    `cache`, append the records to `log`."""
    own = measurer is None
    measurer = measurer or GpuMeasurer(spec, options.seed)
    try:
        result = tune(spec, measurer, options)
    finally:
        if own:
            measurer.close()
    if (entry := entry_of(result)) is not None:
        cache.store(entry)
    if log is not None:
        write_log(result, log)
    return result


def cached_entry(
    spec: Spec, arch: str, cache: TuningCache | None = None, gpu: str | None = None
) -> Entry | None:
    """The cached entry of `spec` for `gpu` (by default the current GPU's name;
    None without one) and this compiler, if it was tuned for `arch`."""
    if gpu is None:
        from affinec.backend.runtime import cuda_available
        from affinec.tuning.measure import gpu_name

        if not cuda_available():
            return None
        gpu = gpu_name()
    entry = (cache or TuningCache()).lookup(tuning_key(spec), gpu)
    return entry if entry is not None and entry.arch == arch else None


def compile_cached(
    spec_or_module: Spec | ModuleOp,
    arch: str,
    *,
    tune_if_missing: bool = False,
    cache: str | Path | None = None,
    options: TuneOptions | None = None,
    gpu: str | None = None,
) -> CompiledKernel:
    """Compile with the cached configuration of the spec for `gpu` (the current
    GPU by default) when there is one (tuning it first if `tune_if_missing`), else
    with `config_for`'s; the result's `config_source` says which."""
    from affinec.dialects.affinec import read_spec

    if isinstance(spec_or_module, ModuleOp):
        spec = read_spec(spec_or_module, required=False)
    elif isinstance(spec_or_module, Spec):
        spec = spec_or_module
    else:
        raise not_a_spec(spec_or_module, or_module=True)
    store = TuningCache(cache)
    entry = None
    if spec is not None:
        entry = cached_entry(spec, arch, store, gpu)
        if entry is None and tune_if_missing:
            from affinec.backend.runtime import require_gpu

            require_gpu()
            result = tune_and_store(
                spec, options or TuneOptions(arch=arch), store, log=None
            )
            entry = entry_of(result)
    elif tune_if_missing:
        raise ValueError("tune=True needs a spec (or a module that records one)")
    if entry is None:
        return compile_to_ptx(spec_or_module, arch=arch)
    compiled = compile_to_ptx(spec_or_module, entry.config, arch=arch)
    ms = f"{entry.ms:.4f} ms" if math.isfinite(entry.ms) else "?"
    compiled.config_source = f"tuned ({ms} on {entry.gpu}, cache {store.path})"
    return compiled


__all__ = ["cached_entry", "compile_cached", "entry_of", "tune_and_store"]
