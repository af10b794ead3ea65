"""A measurer without a GPU: the cost model's prediction taken as the time.

`affinec tune --measure cost-model` (and `tune_specs_ray(measure="cost-model")`)
runs the whole tuning — compiling, pruning, ranking, measuring, the finalists, the
cache — on machines with no GPU, so that the orchestration runs in CI. Nothing is
launched and nothing is checked against float64: a "measured" time is the model's
prediction for the compiled kernel (ptxas's registers and the PTX's instruction
mix, `affinec.tuning.cost`), the same number the ranking used. The cache keys such
entries by `COST_MODEL_GPU`, a name no GPU has, so `affinec.compile` never takes
them for a real GPU's.
"""

from __future__ import annotations

import time

from affinec.backend.runtime import Kernel
from affinec.base.spec import Spec
from affinec.tuning.measure import Measurement

COST_MODEL_GPU = "cost model (no GPU)"
"""The GPU name of what the cost model measured, in the cache and the reports."""


class CostModelMeasurer:
    """A `Measurer` whose times are the cost model's predictions (see the module)."""

    gpu = COST_MODEL_GPU

    def __init__(self, spec: Spec | None = None, seed: int = 0) -> None:
        self.spec = spec
        self.broken = False

    def measure(self, kernel: Kernel, final: bool = False) -> Measurement:
        start = time.perf_counter()
        predicted = kernel.info.get("predicted_ms")
        if predicted is None:
            return Measurement(
                False,
                reason="launch failed: the cost model has no prediction for this "
                "kernel (it was not ranked)",
            )
        return Measurement(
            True, float(predicted), None, seconds=time.perf_counter() - start
        )

    def confirm(self, kernel: Kernel, runs: int) -> Measurement:
        # nothing ran, so there is nothing to check: the model's kernels are taken
        return Measurement(True)

    def cudnn_ms(self, relu: bool = False, tf32: bool = False) -> float | None:
        return None

    def close(self) -> None:
        pass


__all__ = ["COST_MODEL_GPU", "CostModelMeasurer"]
