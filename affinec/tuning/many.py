"""Tuning many specs at once — a whole network's distinct convolutions — within one
budget; each spec gets an equal share of what is left of it. Each spec's
candidates go to a pool of compiler processes of their own, started once the spec
before is compiled, while it is measured (so compiling keeps ahead of the GPU),
and shut down when the spec is done. A pool lives for one spec because LLVM, as
llvmlite 0.50 runs its -O3 pipeline, keeps about 0.3 KB an instruction of every
module a process optimized (1-3 MB a tensor-core kernel) until the process ends:
one pool for a whole network's thousands of candidates grew by gigabytes.

    results = tune_specs(specs, options, cache, budget_s=300, measurer_for=GpuMeasurer)
    for r in results: r.spec, r.outcome, r.entry

Without `measurer_for` (no GPU) the candidates are compiled and ranked only and
nothing is cached. A spec the cache already holds is not tuned again (`force` does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from affinec.base.spec import Spec
from affinec.tuning.cache import Entry, TuningCache, tuning_key
from affinec.tuning.compiling import Compilation, make_pool
from affinec.tuning.log import write_log
from affinec.tuning.measure import Measurer
from affinec.tuning.space import Space, search_space
from affinec.tuning.tune_result import TuneResult
from affinec.tuning.tuner import TuneOptions, start_compiling, tune

MIN_SHARE_S = 2.0
"""A spec whose share of the budget would be shorter is skipped, said so."""


@dataclass
class SpecTuning:
    """What became of one spec: `cached` (left as the cache had it), `tuned`,
    `ranked` (no GPU), `failed` (nothing measured was right) or `skipped` (the
    budget was spent)."""

    spec: Spec
    outcome: str
    result: TuneResult | None = None
    entry: Entry | None = None


def tune_specs(
    specs: Sequence[Spec],
    options: TuneOptions,
    cache: TuningCache,
    *,
    budget_s: float,
    gpu: str = "",
    measurer_for: Callable[[Spec], Measurer] | None = None,
    force: bool = False,
    log_dir: Path | None = None,
    say: Callable[[str], None] = print,
) -> list[SpecTuning]:
    """Tune `specs` (distinct) within `budget_s` seconds in all (see the module)."""
    start = time.monotonic()
    done: dict[Spec, SpecTuning] = {}
    for spec in specs:
        entry = (
            None
            if force or measurer_for is None
            else cache.lookup(tuning_key(spec), gpu)
        )
        if entry is not None and entry.arch == options.arch:
            done[spec] = SpecTuning(spec, "cached", entry=entry)
    todo = [s for s in specs if s not in done]
    started: dict[int, tuple[Space, Compilation]] = {}

    def start_compiling_spec(k: int) -> None:
        if k < len(todo) and k not in started:
            spec = todo[k]
            space = search_space(
                spec, max_candidates=options.max_candidates, arch=options.arch
            )
            pool = make_pool(options.workers) if options.workers > 1 else None
            compilation = start_compiling(spec, space, options.arch, pool)
            # the next spec compiles while this one is measured
            compilation.after = lambda: start_compiling_spec(k + 1)
            started[k] = space, compilation

    try:
        for k, spec in enumerate(todo):
            left = budget_s - (time.monotonic() - start)
            share = left / (len(todo) - k)
            if share < MIN_SHARE_S:
                if k in started:
                    _end(started.pop(k)[1])
                done[spec] = SpecTuning(spec, "skipped")
                say(f"{spec.to_text()}: skipped, the budget is spent")
                continue
            start_compiling_spec(k)
            space, compilation = started[k]
            measurer = measurer_for(spec) if measurer_for is not None else None
            try:
                result = tune(
                    spec,
                    measurer,
                    replace(options, budget_s=share),
                    compilation=compilation,
                    space=space,
                    gpu=gpu,
                )
            finally:
                if measurer is not None:
                    measurer.close()
                _end(started.pop(k)[1])
            done[spec] = _stored(result, cache, measurer is not None)
            if log_dir is not None:
                write_log(result, log_dir / f"{spec.kind}-{len(done)}.jsonl")
            say(_line(done[spec]))
    finally:
        for _, compilation in started.values():
            _end(compilation)
    return [done[s] for s in specs]


def _end(compilation: Compilation) -> None:
    """What is left of a spec's compiles cancelled, and its pool's processes ended
    (with them what LLVM kept)."""
    compilation.cancel()
    if compilation.pool is not None:
        compilation.pool.shutdown(cancel_futures=True)


def _stored(result: TuneResult, cache: TuningCache, measured: bool) -> SpecTuning:
    from affinec.tuning import entry_of

    if not measured:
        return SpecTuning(result.spec, "ranked", result)
    entry = entry_of(result)
    if entry is None:
        return SpecTuning(result.spec, "failed", result)
    cache.store(entry)
    return SpecTuning(result.spec, "tuned", result, entry)


def _line(t: SpecTuning) -> str:
    if t.entry is not None:
        gain = (
            f" ({t.entry.baseline_ms / t.entry.ms:.2f}x config_for)"
            if t.entry.baseline_ms
            else ""
        )
        return f"{t.spec.to_text()}: {t.outcome}, {t.entry.ms:.4f} ms{gain}"
    if t.result is not None and t.outcome == "ranked":
        ranked = sorted(
            (r for r in t.result.records if r.rank is not None), key=lambda r: r.rank
        )
        best = ranked[0] if ranked else None
        if best is not None:
            return (
                f"{t.spec.to_text()}: ranked, {best.predicted_ms:.4f} ms predicted "
                f"for {best.config.describe()}"
            )
    return f"{t.spec.to_text()}: {t.outcome}"
