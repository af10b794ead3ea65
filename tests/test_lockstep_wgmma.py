"""Hopper's `wgmma.mma_async` at the nvvm and llvm levels in lockstep: each
warpgroup's MMA read through its descriptors once for its 128 threads, the
registers an array over the lanes, the commit and wait groups once a warpgroup;
the same bits as thread by thread (the coroutines' warpgroup rendezvous), and
the same races."""

import numpy as np
import pytest

from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.dialects import gpu, nvvm
from affinec.driver.config import KernelConfig
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipeline_names import pass_text
from affinec.driver.pipelines import default_passes
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build
from affinec.frontend.reference import poisoned_output, random_inputs
from affinec.interpreter import Interpreter
from affinec.interpreter.shared_memory import DataRaceError

NVVM_LEVELS = ("convert-nvgpu-to-nvvm", "convert-scf-to-cf", "convert-gpu-to-nvvm")
"""The levels with `nvvm.wgmma.mma_async` on i64 descriptors: memrefs and element
pointers, then blocks, then the llvm level's pointers."""

ROUTES = {
    # A from shared memory: two warpgroups' rows, partial tiles, two stages of
    # cp.async
    "matmul": (
        MatmulSpec(136, 40, 96, "f16", "bias-relu"),
        KernelConfig(
            tile_sizes=(128, 32), reduction_tile_sizes=(32,), mma=True,
            tensor_core="wgmma", stages=2, tma=False,
        ),
    ),
    # a 3x3's input tile read by descriptor, one tap and 64 channels a step, a
    # partial pixel box
    "taps": (
        ConvSpec(1, 64, 9, 9, 32, 3, 3, padding=1, layout="nhwc",
                 filter_layout="rsck", dtype="f16", epilogue="bias-relu"),
        KernelConfig(
            tile_sizes=(1, 8, 8, 32), reduction_tile_sizes=(1, 1, 64), mma=True,
            tensor_core="wgmma", stages=2, tma=False, reassociate=True,
        ),
    ),
}  # fmt: skip


def _levels(spec, config) -> dict[str, object]:
    levels = {}
    passes = [*Pipeline.parse("nvvm-attach-target{chip=sm_90a}").passes]
    passes += default_passes(config)

    def keep(p, module, _seconds) -> None:
        name = pass_text(p).split("{")[0]
        if name in NVVM_LEVELS:
            levels[name] = module.clone()

    Pipeline(passes).run(build(spec), callback=keep)
    assert set(levels) == set(NVVM_LEVELS)
    return levels


def _run(module, spec, lockstep: bool, seed: int = 3) -> np.ndarray:
    interpreter = Interpreter(module, lockstep=lockstep)
    assert ("WGMMA_LANES" in interpreter.source) == lockstep
    inputs = random_inputs(spec, np.random.default_rng(seed))
    out = poisoned_output(spec)
    interpreter.run(contraction_of(spec).name, *inputs, out)
    return out


@pytest.mark.parametrize("route", ROUTES)
def test_nvvm_wgmma_in_lockstep_is_bit_identical(route):
    spec, config = ROUTES[route]
    for name, module in _levels(spec, config).items():
        assert any(isinstance(op, nvvm.WgmmaMmaAsyncOp) for op in module.walk())
        together, apart = (_run(module, spec, lockstep) for lockstep in (True, False))
        assert together.tobytes() == apart.tobytes(), name
        assert np.isfinite(together.astype(np.float32)).all(), name


def test_a_wgmma_reading_a_tile_before_its_barrier_races_in_lockstep():
    # every barrier erased: the MMA reads tiles other threads' copies landed in
    # the same interval, which both ways find
    spec, config = ROUTES["matmul"]
    module = _levels(spec, config)["convert-nvgpu-to-nvvm"]
    for op in [o for o in module.walk() if isinstance(o, gpu.BarrierOp)]:
        op.detach()
        op.erase()
    for lockstep in (True, False):
        with pytest.raises(DataRaceError, match="data race on shared memory"):
            _run(module, spec, lockstep)


def test_a_copy_over_a_tile_a_wgmma_group_still_reads_races_in_lockstep():
    # the waits for the MMA's groups erased: the next stage's copy overwrites
    # tiles a group left in flight may still be reading, whatever the barriers
    spec, config = ROUTES["matmul"]
    module = _levels(spec, config)["convert-nvgpu-to-nvvm"]
    waits = [o for o in module.walk() if isinstance(o, nvvm.WgmmaWaitGroupSyncOp)]
    assert waits
    for op in waits:
        op.detach()
        op.erase()
    for lockstep in (True, False):
        with pytest.raises(DataRaceError, match="no wgmma wait has retired"):
            _run(module, spec, lockstep)
