"""What runs on a Ray cluster's workers when a zoo is tuned over it
(`affinec.tuning.distributed`): the measuring actor, one per GPU, and the compile
task, one CPU each, with how often Ray starts each again.

Nothing here imports Ray: the driver makes the actor class and the task remote
(`ray.remote`) once it has the `ray` module, which is an optional extra.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from affinec.base.spec import Spec, parse_spec
from affinec.tuning.compiling import compile_one
from affinec.tuning.measure import Measurement, Measurer
from affinec.tuning.model_measure import CostModelMeasurer

GPU = "gpu"
COST_MODEL = "cost-model"
MEASURES = (GPU, COST_MODEL)
"""How the actors measure: on their GPU, or by the cost model on a CPU."""

SCREEN, FINAL, CONFIRM = "screen", "final", "confirm"
"""The kinds of measurement an actor makes: a screening one, a finalist's, or the
best's confirmation."""

COMPILE_RETRIES = 3
"""Times Ray runs a compile again whose worker process died."""
RECYCLE_COMPILES = 32
"""Compiles a worker process runs before Ray replaces it (LLVM's memory)."""
ACTOR_RESTARTS = 100
"""Times Ray restarts a measuring actor that died or was killed (each hang costs
one)."""


def compile_task(ray: Any) -> Any:
    """`compile_one` as a Ray task of one CPU, run again if its worker dies, in a
    worker replaced after `RECYCLE_COMPILES` compiles (LLVM keeps the memory of every
    module it optimized)."""
    return ray.remote(
        num_cpus=1, max_retries=COMPILE_RETRIES, max_calls=RECYCLE_COMPILES
    )(compile_one)


class MeasuringActor:
    """What runs in each measuring actor: a measurer for the spec at hand (made again
    when the spec changes), one kernel at a time."""

    def __init__(
        self, measure: str | Callable[[Spec, int], Measurer], seed: int
    ) -> None:
        self.measure = measure
        self.seed = seed
        self.spec_text: str | None = None
        self.measurer: Measurer | None = None

    def identity(self, gpu: str) -> tuple[str, str | None, int]:
        """The GPU's name (`gpu` unless it measures on one), its architecture (None
        without a GPU) and the process's id."""
        if self.measure == GPU:
            from affinec.backend.runtime import current_arch, require_gpu
            from affinec.tuning.measure import gpu_name

            require_gpu()
            return gpu_name(), current_arch(), os.getpid()
        return gpu, None, os.getpid()

    def run(
        self, spec_text: str, kernel: Any, kind: str, runs: int
    ) -> tuple[Measurement, bool]:
        """Measure (`screen`, `final`) or confirm `kernel`; the measurement and
        whether the GPU is broken since."""
        measurer = self._measurer_for(spec_text)
        if kind == CONFIRM:
            m = measurer.confirm(kernel, runs)
        else:
            m = measurer.measure(kernel, final=kind == FINAL)
        return m, measurer.broken

    def _measurer_for(self, spec_text: str) -> Measurer:
        if self.measurer is None or spec_text != self.spec_text:
            if self.measurer is not None:
                self.measurer.close()
                self.measurer = None
            spec = parse_spec(spec_text)
            if self.measure == GPU:
                from affinec.tuning.measure import GpuMeasurer

                self.measurer = GpuMeasurer(spec, self.seed)
            elif self.measure == COST_MODEL:
                self.measurer = CostModelMeasurer(spec, self.seed)
            else:
                assert callable(self.measure)
                self.measurer = self.measure(spec, self.seed)
            self.spec_text = spec_text
        return self.measurer
