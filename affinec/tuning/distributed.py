"""Tuning a model zoo over a Ray cluster: compiling on every CPU, measuring on every
GPU, one cache, nothing lost when a worker dies.

    import ray
    from affinec.tuning import TuneOptions, TuningCache
    from affinec.tuning.distributed import tune_specs_ray

    ray.init(address="auto")            # a running cluster; ray.init() starts one here
    zoo = tune_specs_ray(specs, TuneOptions(top=24), TuningCache())
    print(zoo.table())

(`affinec tune network resnet50 vgg16 --batch 1 8 --ray [ADDRESS]` on the command
line.) Each spec goes through the same search as `affinec.tuning.tune`: the same
candidates, pruning, ranking, picks, finalists and confirmation, so the same
measurements give the same result. What differs is where each step runs:

- every candidate is compiled by a Ray task (one CPU each, anywhere in the
  cluster), the zoo's specs queued in order so that the first finish first; a
  worker process is replaced after `RECYCLE_COMPILES` compiles, because LLVM keeps
  the memory of every module it optimized (`affinec.tuning.many`);
- one Ray actor per GPU measures (`num_gpus=1`: Ray gives it that GPU alone), one
  kernel at a time. The driver hands an idle actor the next kernel as soon as one is
  ready: a spec's baseline as soon as it is compiled, the spec's other picks as soon
  as its candidates are all compiled (the model ranks a spec's candidates
  together), while the next specs compile. No GPU waits for the zoo's compiles;
- results come back to the driver, which alone writes the cache: the JSON file that
  `affinec.compile` reads, keyed by spec and GPU model (why that format and not
  SQLite: `affinec.tuning.cache`), and its journal, one line per measurement as it
  comes in. A cluster whose GPUs are of several models tunes each spec for each.

Faults. A compile whose worker dies is run again by Ray (`COMPILE_RETRIES`). A
measuring actor that dies is restarted by Ray (`max_restarts`), and the kernel it
was measuring is measured again (`remeasure` times; after that it is recorded as
`lost`); nothing else is lost. A measurement that takes longer than `timeout_s` (a
kernel that hangs its GPU) has its actor killed and restarted, and is recorded as
`timed-out`, in the journal too, so that no later run waits on it again. A run
started again skips the specs the cache has and takes the measurements the journal
has instead of measuring them again.

Without a GPU in the cluster, `measure="cost-model"` measures with the cost model
(`affinec.tuning.model_measure`): the reports say so, and the cache keys those
entries by a GPU name of their own.

This module is the driver: it starts the actors and builds each spec's unit of
work. The parts: `ray_workers` (what runs on the workers: the measuring actor, the
compile task), `ray_driver` (the loop over Ray's results), `zoo_steps` (each spec's
search, step by step), `journal` (the journal's rows), `zoo_results` (`ShapeTuning`,
`ZooTuning`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from affinec.base.extras import missing_extra
from affinec.base.spec import Spec
from affinec.tuning.cache import TuningCache, tuning_key
from affinec.tuning.journal import journal_index
from affinec.tuning.measure import Measurer, MeasurerUnavailable
from affinec.tuning.model_measure import COST_MODEL_GPU
from affinec.tuning.ray_driver import RayDriver, Slot, cause_of
from affinec.tuning.ray_workers import (
    ACTOR_RESTARTS,
    COST_MODEL,
    GPU,
    MEASURES,
    MeasuringActor,
)
from affinec.tuning.ray_workers import COMPILE_RETRIES as COMPILE_RETRIES
from affinec.tuning.ray_workers import RECYCLE_COMPILES as RECYCLE_COMPILES
from affinec.tuning.tuner import TuneOptions
from affinec.tuning.zoo_results import ShapeTuning, ZooTuning
from affinec.tuning.zoo_steps import LOST, TIMED_OUT, Unit


def require_ray() -> Any:
    """The `ray` module, or a `MissingExtra` naming the extra that installs it."""
    try:
        import ray
    except ModuleNotFoundError as error:
        raise missing_extra(error, "tuning through Ray (affinec tune --ray)") from None
    return ray


def connect(address: str | None = None) -> None:
    """Join the Ray cluster at `address` ("auto": the one this machine belongs to;
    "ray://host:10001": through Ray's client), or with None the one `RAY_ADDRESS`
    names, else start one on this machine. Nothing if Ray is initialized already."""
    ray = require_ray()
    if ray.is_initialized():
        return
    if address is None and not os.environ.get("RAY_ADDRESS"):
        ray.init(include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)


def tune_specs_ray(
    specs: Sequence[Spec],
    options: TuneOptions,
    cache: TuningCache,
    *,
    measure: str | Callable[[Spec, int], Measurer] = GPU,
    gpu: str = "",
    arch: str | None = None,
    measurers: int = 0,
    timeout_s: float = 120.0,
    remeasure: int = 1,
    budget_s: float | None = None,
    force: bool = False,
    say: Callable[[str], None] | None = None,
) -> ZooTuning:
    """Tune the distinct `specs` over the Ray cluster this process is connected to
    (`connect`; a local one is started if none), storing each best in `cache` (see
    the module).

    `measure`: `"gpu"` (one actor per GPU of the cluster), `"cost-model"` (no GPU:
    the cost model's predictions, see `affinec.tuning.model_measure`), or a function
    `(spec, seed) -> Measurer`, run in each actor, whose results are cached under
    `gpu`. `arch`: what to compile for (default: each GPU's own; without a GPU,
    `options.arch`). `measurers`: how many actors (default: one per GPU; one
    without GPUs).
    `timeout_s`: longest a measurement may take. `remeasure`: times a kernel is
    measured again after its actor died. `budget_s`: after that many seconds no more
    compiles or screening measurements start (the specs not compiled are `skipped`).
    `force`: tune the specs the cache has, measuring everything again. `say`: where
    the line of each finished spec goes (with `options.progress`, above a bar).
    """
    ray = require_ray()
    options = options.validate()
    if not isinstance(measure, str):
        if not gpu:
            raise ValueError("a measurer of your own needs the name of its GPU (gpu=)")
    elif measure not in MEASURES:
        raise ValueError(
            f"unknown measure '{measure}' (expected one of {', '.join(MEASURES)})"
        )
    if timeout_s <= 0 or remeasure < 0 or measurers < 0:
        raise ValueError("timeout_s must be positive, remeasure and measurers >= 0")
    if not ray.is_initialized():
        connect(None)
    start = time.monotonic()
    resources = ray.cluster_resources()
    cpus = float(resources.get("CPU", 0))
    if measure == GPU:
        gpus = int(resources.get("GPU", 0))
        count = measurers or gpus
        if count > gpus:
            raise ValueError(
                f"{count} measurers asked for, the cluster has {gpus} GPUs"
            )
        if count == 0:
            raise MeasurerUnavailable(
                "the Ray cluster has no GPU to measure on: --measure cost-model "
                "tunes by the cost model without one"
            )
        actor_options = {"num_gpus": 1, "num_cpus": 1}
    else:
        count = measurers or 1
        # light: they must leave the CPUs to the compiles
        actor_options = {"num_gpus": 0, "num_cpus": 0}
    actor_gpu = COST_MODEL_GPU if measure == COST_MODEL else gpu
    actor_class = ray.remote(MeasuringActor)
    slots = [
        Slot(
            actor_class.options(
                max_restarts=ACTOR_RESTARTS, max_task_retries=0, **actor_options
            ).remote(measure, options.seed)
        )
        for _ in range(count)
    ]
    try:
        identities = ray.get([s.actor.identity.remote(actor_gpu) for s in slots])
    except ray.exceptions.RayTaskError as e:
        _kill_all(ray, slots)
        raise cause_of(e) from None
    for s, (name, _, _) in zip(slots, identities, strict=True):
        s.state, s.gpu = "idle", name
    models = sorted(
        {(name, arch or found or options.arch) for name, found, _ in identities}
    )
    distinct = list(dict.fromkeys(specs))
    journal = {} if force else journal_index(cache)
    units: list[Unit] = []
    results: list[ShapeTuning] = []
    for name, target in models:
        for spec in distinct:
            key = tuning_key(spec)
            done = journal.get((key, name, target), {})
            unit = Unit(len(units), spec, name, target, done)
            units.append(unit)
            entry = None if force else cache.lookup(key, name)
            if entry is not None and entry.arch == target:
                unit.phase = "done"
                unit.tuning = ShapeTuning(spec, "cached", entry=entry, gpu=name)
    driver = RayDriver(
        ray, options, cache, units, slots, actor_gpu, timeout_s, remeasure,
        None if budget_s is None else start + budget_s, cpus, say or print, measure,
    )  # fmt: skip
    try:
        driver.run()
    finally:
        _kill_all(ray, slots)
        driver.close()
    for unit in units:
        assert unit.tuning is not None
        results.append(unit.tuning)
    return ZooTuning(
        results,
        measure if isinstance(measure, str) else "custom",
        count,
        cpus,
        time.monotonic() - start,
        driver.compile_failures,
        sum(s.restarts for s in slots),
    )


def _kill_all(ray: Any, slots: list[Slot]) -> None:
    for s in slots:
        with contextlib.suppress(Exception):  # already gone
            ray.kill(s.actor, no_restart=True)


__all__ = [
    "COST_MODEL",
    "GPU",
    "LOST",
    "MEASURES",
    "TIMED_OUT",
    "MeasuringActor",
    "ShapeTuning",
    "ZooTuning",
    "connect",
    "require_ray",
    "tune_specs_ray",
]
