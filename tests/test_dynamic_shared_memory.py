"""Workgroup buffers past 48 KiB: `convert-gpu-to-nvvm` places them in dynamic shared
memory, the launches and the launch record give the bytes, and the interpreter runs
the result (typed regions of one block-wide buffer, race-checked like any shared
buffer). The GPU run is in tests/test_gpu.py."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from affinec.base.diagnostics import PassError, format_exception, verify
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec
from affinec.dialects.nvvm_target import TARGET, target_attr
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.frontend.reference import (
    TOLERANCE,
    poisoned_output,
    random_inputs,
    reference,
    relative_error,
)
from affinec.interpreter import Interpreter, InterpreterError
from affinec.ir.context import make_context

LOWERING = "convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}"
KERNEL = Path(__file__).parent / "filecheck/lowering/dynamic_shared_memory.mlir"

# Three stages of a tensor-core step over the whole 3x3 window: 30528 bytes each; the
# output staged for 16-byte stores (128 pixels of 64 channels, rows padded to 144
# bytes) takes the bytes of the input tiles (`OVERLAY`), dead by then.
SPEC = ConvSpec(
    1, 48, 4, 32, 64, 3, 3, padding=1, dtype="f16", layout="nhwc",
    filter_layout="rsck",
)  # fmt: skip
CONFIG = dataclasses.replace(config_for(SPEC), stages=3)


def test_a_pipelined_tensor_core_kernel_past_48_kib():
    assert CONFIG.mma and CONFIG.reduction_tile_sizes == (3, 3, 16)
    module = build(SPEC)
    Pipeline(default_passes(CONFIG)).run(module)
    inputs = random_inputs(SPEC, np.random.default_rng(3))
    out = poisoned_output(SPEC)
    Interpreter(module).run("conv", *[x.copy() for x in inputs], out)
    assert relative_error(out, reference(SPEC, *inputs)) <= TOLERANCE["f16"]
    compiled = compile_to_ptx(SPEC, CONFIG, arch="sm_90")
    assert CONFIG.stage_output
    assert compiled.launch.dynamic_shared_memory == 3 * 30528
    assert ".extern .shared .align 16 .b8 __dynamic_shared_conv_kernel[];" in (
        compiled.ptx
    )


def test_the_staged_output_without_its_first_barrier_races_on_the_tiles_bytes(
    monkeypatch,
):
    # The staged tile takes the input tiles' bytes: without the barrier before it, a
    # warp stores its fragments where slower warps still read the last step's input
    # (64 channels: four steps over three stages, the last in stage 0). The static
    # check of the next pass refuses it; with that check off, the levels above nvvm
    # keep the two buffers apart and the lowered kernel shows the race.
    from affinec.dialects import affine, gpu
    from affinec.dialects.affinec import THREAD, mapping_of
    from affinec.driver.checking import Checker

    spec = dataclasses.replace(SPEC, c=64)
    passes = default_passes(CONFIG)
    mma = next(k for k, p in enumerate(passes) if p.name == "affinec-mma-sync")
    module = build(spec)
    Pipeline(passes[: mma + 1]).run(module)
    staging = next(
        o
        for o in module.walk()
        if isinstance(o, affine.ParallelOp)
        and mapping_of(o) == THREAD
        and any(
            isinstance(x, affine.VectorStoreOp)
            and x.memref.name_hint == "output_shared"
            for x in o.walk()
        )
    )
    barrier = staging.prev_op
    assert isinstance(barrier, gpu.BarrierOp)
    barrier.detach()
    barrier.erase()
    with pytest.raises(PassError, match="may still be reading"):
        Pipeline(passes[mma + 1 :]).run(module.clone())
    for name, check in (
        ("affinec_map_threads", "check_after_pass"),
        ("convert_parallel_to_gpu", "check_after_pass"),
        ("gpu_kernel_outlining", "check_kernels"),
    ):
        monkeypatch.setattr(f"affinec.passes.{name}.{check}", lambda *a, **k: None)
    Pipeline(passes[mma + 1 :]).run(module)
    result = Checker(spec).check("without the barrier", module)
    assert not result.ok
    assert "data race on shared memory %dynamic_shared" in result.message
    assert "writes what other threads read" in result.message


def lowered() -> str:
    module = parse_module(make_context(), KERNEL.read_text(), str(KERNEL))
    Pipeline.parse(LOWERING).run(module)
    return str(module)


def run_host(text: str) -> np.ndarray:
    module = parse_module(make_context(), text, "lowered.mlir")
    verify(module)
    a = np.arange(128, dtype=np.float32)
    Interpreter(module).run("host", a)
    return a


def test_the_lowered_kernel_runs_in_its_regions():
    # The kernel copies through its third buffer, at byte 54016.
    np.testing.assert_array_equal(run_host(lowered()), np.arange(128))


def test_a_launch_without_the_bytes_is_refused():
    text = lowered().replace("dynamic_shared_memory_size %0 ", "")
    with pytest.raises(InterpreterError, match="launches @k with 0 bytes"):
        run_host(text)


def test_one_region_in_two_types_is_refused_at_the_op():
    text = lowered().replace(
        "%1[24000] : (!llvm.ptr<3>) -> !llvm.ptr<3>, f16",
        "%1[0] : (!llvm.ptr<3>) -> !llvm.ptr<3>, f16",
    )
    with pytest.raises(InterpreterError) as info:
        run_host(text)
    message = format_exception(info.value)
    assert message.startswith("lowered.mlir:")
    assert "dynamic shared memory at byte 0 is addressed as float32 and as float16" in (
        message
    )


# -- the plan: affinec-plan-shared-memory decides, convert-gpu-to-nvvm follows ----------


def planned(offsets: str) -> str:
    text = KERNEL.read_text().replace(
        ") kernel {", f") kernel attributes {{affinec.shared_offsets = {offsets}}} {{"
    )
    module = parse_module(make_context(), text, "planned.mlir")
    Pipeline.parse(LOWERING).run(module)
    return str(module)


def test_the_planner_records_each_buffers_offset_and_the_launch_carries_them():
    passes = default_passes(CONFIG)
    plan = next(
        k for k, p in enumerate(passes) if p.name == "affinec-plan-shared-memory"
    )
    module = build(SPEC)
    Pipeline(passes[: plan + 2]).run(module)  # through the conversion to gpu.launch
    text = str(module)
    # the input tiles' bytes are dead when the staged output is written (overlay)
    assert "affinec.overlay = array<i64: 2>" in text
    assert "affinec.shared_offsets = array<i64: 0, 62208, 62208>" in text


def test_the_lowering_follows_the_planned_offsets():
    # z first, then x, then y: a layout the rule would not pick, followed as given
    text = planned("array<i64: 512, 48512, 0>")
    assert "arith.constant 54514 : i32" in text  # y's 6002 bytes end the block
    assert "%x = llvm.getelementptr inbounds %0[128] " in text  # 512 bytes of f32
    assert "%y = llvm.getelementptr inbounds %1[24256] " in text  # 48512 of f16
    assert "%z = llvm.getelementptr inbounds %2[0] " in text
    np.testing.assert_array_equal(run_host(text), np.arange(128))


@pytest.mark.parametrize(
    "offsets, why",
    [
        ("array<i64: 0, 0, 54016>", "#0 and #1 share bytes"),
        ("array<i64: 0, 24000>", "2 offsets for 3 shared buffers"),
        ("array<i64: 0, 24008, 54016>", "not a multiple of 16 bytes"),
    ],
)
def test_a_recorded_layout_that_does_not_hold_is_refused_at_the_kernel(offsets, why):
    with pytest.raises(PassError) as info:
        planned(offsets)
    message = format_exception(info.value)
    assert message.startswith("planned.mlir:16:")
    assert "do not lay out its workgroup buffers" in message and why in message


def test_the_planner_refuses_a_block_its_padding_takes_past_the_chip():
    # Four stages fit sm_86's 99 KiB as the tiles come (99840 bytes); padded
    # against bank conflicts they take 122112.
    spec = dataclasses.replace(SPEC, c=64)  # four steps of 16 channels
    module = build(spec)
    module.attributes[TARGET] = target_attr("sm_86")
    with pytest.raises(
        PassError,
        match=r"122112 bytes once padded and placed, more "
        r"than the 101376 bytes .* on sm_86",
    ):
        Pipeline(default_passes(dataclasses.replace(CONFIG, stages=4))).run(module)
    module = build(spec)
    module.attributes[TARGET] = target_attr("sm_90")  # 227 KiB: it fits
    Pipeline(default_passes(dataclasses.replace(CONFIG, stages=4))).run(module)
