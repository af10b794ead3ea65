"""Hopper's `wgmma.mma_async` at the nvvm and llvm levels in lockstep: each
warpgroup's MMA read through its descriptors once for its 128 threads, the
registers an array over the lanes, the commit and wait groups once a warpgroup;
the same bits as thread by thread (the coroutines' warpgroup rendezvous), and
the same races. And the warpgroup steps' tiles landed by TMA read at once
(`warpgroup_steps._read_landed`): the same bits and races as run by run."""

from dataclasses import replace

import numpy as np
import pytest
from pipeline_levels import erase_barriers, sm_90a_levels

from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.dialects import gpu, nvvm
from affinec.driver.config import KernelConfig
from affinec.frontend.contraction import contraction_of
from affinec.frontend.reference import poisoned_output, random_inputs
from affinec.interpreter import Interpreter, warpgroup_steps
from affinec.interpreter.mbarriers import MBarrier, block_barriers
from affinec.interpreter.shared_memory import (
    LANDED,
    WARPGROUP_READER,
    BlockState,
    DataRaceError,
    SharedArray,
)
from affinec.ir.context import make_context

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


def _levels(spec, config, names=NVVM_LEVELS) -> dict[str, object]:
    return sm_90a_levels(spec, config, names)


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
    erase_barriers(module)
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


def _tma_kernel(text_edit=None):
    """The taps route by TMA (mbarriers, its kernel thread by thread) once
    outlined, its text edited by `text_edit`."""
    spec, config = ROUTES["taps"]
    config = replace(config, tma=True)
    module = _levels(spec, config, ("gpu-kernel-outlining",))["gpu-kernel-outlining"]
    text = str(module)
    if text_edit is not None:
        text = text_edit(text)
    return spec, parse_module(make_context(), text)


def _run_tiles(module, spec, at_once: bool, monkeypatch) -> tuple:
    """The output, or the error, with TMA's tiles read at once where possible or
    always run by run; and how many tiles were read at once."""
    read = []

    def landed(*args):
        got = original(*args) if at_once else None
        read.append(got is not None)
        return got

    original = warpgroup_steps._read_landed
    with monkeypatch.context() as patch:
        patch.setattr(warpgroup_steps, "_read_landed", landed)
        try:
            result = _run(module, spec, False).tobytes()
        except DataRaceError as error:
            result = str(error)
    return result, sum(read)


def test_tma_tiles_read_at_once_give_the_bits_run_by_run_reads_give(monkeypatch):
    spec, module = _tma_kernel()
    (at_once, read), (by_runs, _) = (
        _run_tiles(module, spec, fast, monkeypatch) for fast in (True, False)
    )
    assert read > 0
    assert at_once == by_runs


def test_a_tma_tile_read_before_its_wait_is_the_same_race(monkeypatch):
    # the consumers' wait for the stage's landing erased: the step reads tiles a
    # TMA load may still be writing, or landed before the thread waited
    def no_wait(text: str) -> str:
        lines = text.splitlines()
        waits = [
            k
            for k, line in enumerate(lines)
            if "try_wait.parity %stage_barriers" in line
        ]
        assert len(waits) == 1
        del lines[waits[0]]
        return "\n".join(lines)

    spec, module = _tma_kernel(no_wait)
    (at_once, _), (by_runs, _) = (
        _run_tiles(module, spec, fast, monkeypatch) for fast in (True, False)
    )
    assert "data race" in at_once
    assert at_once == by_runs


def _landed_tile(seen: int) -> tuple:
    """A 64 x 64 tile of a block of 256 threads that a TMA landing wrote in this
    interval, read by warpgroup 1 (threads 128 on), `seen` of whose threads
    waited for the landing's phase; a few elements read before in this interval
    by thread 5, a few by the warpgroup, a few by the thread that reads them."""
    state = BlockState("kernel", (0, 0, 0), (256, 1, 1))
    tile = SharedArray("tile", (64, 64), np.dtype(np.float16), state)
    tile.data[...] = np.arange(64 * 64).reshape(64, 64) % 2048
    flat = tile.flat_view()
    barriers = block_barriers(state)
    barrier = MBarrier("%bar[0]")
    barriers.landings[1] = (barrier, 0, gpu.BarrierOp(), 0)
    flat.stamp_writes(slice(0, 64 * 64), LANDED - 1, state.epoch)
    for t in range(128, 128 + seen):
        barriers.observed[(t, barrier.uid)] = 1
    flat.read_epoch[:48] = state.epoch
    flat.reader[:20] = 5
    flat.reader[20:40] = WARPGROUP_READER - 1
    flat.reader[40:48] = 133  # the thread reading their run (the 6th)
    return state, tile


@pytest.mark.parametrize("seen", [128, 127])
def test_a_landed_tile_read_at_once_marks_it_as_run_by_run_reads(seen, monkeypatch):
    positions = (np.arange(64)[:, None] * 64 + np.arange(64)).astype(np.int64)
    results = []
    for at_once in (True, False):
        state, tile = _landed_tile(seen)
        with monkeypatch.context() as patch:
            if not at_once:
                patch.setattr(warpgroup_steps, "_read_landed", lambda *_: None)
            try:
                data = warpgroup_steps._read_tile(
                    gpu.BarrierOp(), tile, positions, state, 128
                )
            except DataRaceError as error:
                results.append(str(error))
                continue
        flat = tile.flat_view()
        results.append(
            (
                data.tobytes(),
                flat.reader.tobytes(),
                flat.read_epoch.tobytes(),
                state.thread,
            )  # fmt: skip
        )
    if seen < 128:  # thread 255 did not wait: the race names it, both ways
        assert "thread (255, 0, 0)" in results[0]
    assert results[0] == results[1]
