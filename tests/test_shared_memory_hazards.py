"""Shared memory without races: the pipelining fix of two wrong answers the GPU found, and the static check.

Two configurations that compiled without a word and returned wrong answers on the
GPU (more stages than reduction tiles: the compute read a tile still being copied)
are interpreted here through the mma level; the static check
(`affinec-verify-shared-memory`, run by every pass that moves copies, waits or
barriers) is shown to refuse the kernel the unfixed pass made
(`tests/filecheck/passes/verify_shared_memory_racy_pipeline.mlir`) and every
mutation of a correct kernel that breaks the discipline, at each level it covers,
while accepting the kernels the passes make (every test that compiles runs it).
"""

from __future__ import annotations

import dataclasses
import re
from functools import partial
from pathlib import Path

import pytest
from xdsl.dialects.builtin import MemRefType
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError, VerificationError
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import OVERLAY
from affinec.driver.config import KernelConfig, config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import affine_passes, default_passes, map_to_gpu_passes
from affinec.frontend.naive import build
from affinec.ir.context import make_context
from affinec.transforms.gpu.shared_memory_hazards import (
    check_shared_memory_hazards,
    hazards_checked_once,
)

RACY = (
    Path(__file__).parent / "filecheck/passes/verify_shared_memory_racy_pipeline.mlir"
)

# -- the two wrong answers the GPU found ----------------------------------------------

# Shrunk from the first the GPU found: three-by-three taps over two reduction tiles of 16
# channels, four stages. Relative error 0.54 on the H100 before the fix.
FOUND_FIRST = (
    ConvSpec(
        n=1, c=32, h=9, w=6, k=32, r=3, s=3, padding=(3, 0), layout="nhwc",
        filter_layout="rsck", dtype="f16",
    ),
    KernelConfig(
        tile_sizes=(1, 16, 2, 32), reduction_tile_sizes=(3, 3, 16), reassociate=True,
        stages=4, mma=True, warp_grid=(1, 2), unroll_taps=True,
    ),
)  # fmt: skip

# The second the GPU found (1x1, stride 3 by 1, bias + ReLU, two tiles of 64 channels, four
# stages; relative error 0.32 on the H100), on a smaller image.
FOUND_SECOND = (
    ConvSpec(
        n=1, c=128, h=7, w=9, k=128, r=1, s=1, stride=(3, 1), padding=(0, 1),
        layout="nhwc", filter_layout="rsck", dtype="f16", epilogue="bias-relu",
    ),
    KernelConfig(
        tile_sizes=(1, 3, 8, 32), reduction_tile_sizes=(1, 1, 64), reassociate=True,
        stages=4, mma=True, warp_grid=(4, 1),
    ),
)  # fmt: skip


@pytest.mark.parametrize("case", [FOUND_FIRST, FOUND_SECOND])
def test_more_stages_than_tiles_keep_the_result(case):
    spec, config = case
    module = build(spec)
    Pipeline(affine_passes(config) + map_to_gpu_passes(config)).run(module, check=True)
    # Two tiles: two stages, and each trip waits for all but the newest group.
    waits = [o for o in module.walk() if isinstance(o, nvgpu.DeviceAsyncWaitOp)]
    assert waits and all(w.groups == 1 for w in waits)
    shared = [
        a.type
        for a in module.walk()
        if isinstance(a, gpu.LaunchOp)
        for a in a.body.block.args
        if isinstance(a.type, MemRefType)
        and gpu.memory_space(a.type) == gpu.WORKGROUP_ADDRESS_SPACE
    ]
    assert shared and all(t.get_shape()[0] == 2 for t in shared)


def test_stages_are_kept_where_the_tiles_fill_them():
    spec, config = FOUND_FIRST
    spec = dataclasses.replace(spec, c=96)  # six tiles of 16 channels
    module = build(spec)
    Pipeline(affine_passes(config)).run(module)
    waits = [o for o in module.walk() if isinstance(o, nvgpu.DeviceAsyncWaitOp)]
    assert waits and all(w.groups == 3 for w in waits)


def test_the_check_refuses_the_unfixed_pipeline():
    module = parse_module(make_context(), RACY.read_text())
    with pytest.raises(PassError, match=r"numGroups = 3 .* leaves its group in flight"):
        Pipeline.parse("affinec-verify-shared-memory").run(module)


# -- mutations of a correct kernel ----------------------------------------------------

SPEC = ConvSpec(
    1, 32, 6, 6, 16, 3, 3, padding=1, layout="nhwc", filter_layout="rsck", dtype="f16"
)
CONFIG = KernelConfig(
    tile_sizes=(1, 2, 6, 16),
    reduction_tile_sizes=(1, 1, 16),
    mma=True,
    warp_grid=(1, 1),
    stages=2,
)
LEVELS = {
    "block": "affinec-insert-barriers",
    "launch": "affinec-convert-parallel-to-gpu",
    "kernel": "gpu-kernel-outlining",
}


def _kernel(level: str, spec: ConvSpec = SPEC, config: KernelConfig = CONFIG):
    module = build(spec)
    passes = default_passes(config)
    stop = next(k for k, p in enumerate(passes) if p.name == LEVELS[level])
    Pipeline(passes[: stop + 1]).run(module)
    check_shared_memory_hazards(module)  # the passes' own result passes
    return module


def _the(module, kind):
    return [o for o in module.walk() if isinstance(o, kind)]


def _erase(op) -> None:
    op.detach()
    op.erase()


def _loop_wait(module) -> nvgpu.DeviceAsyncWaitOp:
    (wait,) = [
        w
        for w in _the(module, nvgpu.DeviceAsyncWaitOp)
        if isinstance(w.parent_op(), affine.ForOp)
    ]
    return wait


@pytest.mark.parametrize("level", list(LEVELS))
def test_a_wait_that_leaves_the_tile_in_flight_is_refused(level):
    module = _kernel(level)
    _loop_wait(module).properties["numGroups"] = _int32(2)
    with pytest.raises(PassError, match="may still be writing: the last wait"):
        check_shared_memory_hazards(module)


@pytest.mark.parametrize("level", list(LEVELS))
def test_a_stricter_wait_is_accepted(level):
    module = _kernel(level)
    _loop_wait(module).properties["numGroups"] = _int32(0)
    check_shared_memory_hazards(module)


@pytest.mark.parametrize("level", list(LEVELS))
def test_a_missing_barrier_after_the_wait_is_refused(level):
    module = _kernel(level)
    wait = _loop_wait(module)
    op = wait.next_op
    while not isinstance(op, gpu.BarrierOp):
        op = op.next_op  # pyright: ignore
    _erase(op)
    with pytest.raises(PassError, match="with no gpu.barrier between"):
        check_shared_memory_hazards(module)
    # The check of the waits alone does not ask for barriers.
    check_shared_memory_hazards(module, barriers=False)


@pytest.mark.parametrize("level", list(LEVELS))
def test_overwriting_a_stage_still_read_is_refused(level):
    module = _kernel(level)
    (guard,) = [
        i
        for i in _the(module, affine.IfOp)
        if any(isinstance(o, gpu.BarrierOp) for o in i.walk())
    ]
    (barrier,) = [o for o in guard.walk() if isinstance(o, gpu.BarrierOp)]
    _erase(barrier)
    with pytest.raises(PassError, match="may still be reading .*no gpu.barrier since"):
        check_shared_memory_hazards(module)


@pytest.mark.parametrize("level", list(LEVELS))
def test_copies_never_waited_for_are_refused(level):
    module = _kernel(level)
    for wait in _the(module, nvgpu.DeviceAsyncWaitOp):
        _erase(wait)
    with pytest.raises(PassError, match="may still be writing"):
        check_shared_memory_hazards(module)


def test_copies_in_no_group_are_refused():
    module = _kernel("launch")
    loop = next(
        o for o in _the(module, affine.ForOp) if _the(o, nvgpu.DeviceAsyncWaitOp)
    )
    (group,) = [
        o for o in loop.body.block.ops if isinstance(o, nvgpu.DeviceAsyncCreateGroupOp)
    ]
    # The wait keeps its token from the prologue's group.
    (prologue,) = [
        o
        for o in _the(module, nvgpu.DeviceAsyncCreateGroupOp)
        if o is not group and o.parent_op() is not loop
    ][-1:]
    group.asyncToken.replace_all_uses_with(prologue.asyncToken)
    _erase(group)
    # Even waiting for every group leaves the copies of tile 1 in flight.
    _loop_wait(module).properties["numGroups"] = _int32(0)
    with pytest.raises(PassError, match="in no nvgpu.device_async_create_group"):
        check_shared_memory_hazards(module)


def test_the_staged_output_waits_for_the_tiles_whose_bytes_it_takes():
    spec = ConvSpec(
        1, 32, 8, 8, 32, 3, 3, padding=1, layout="nhwc", filter_layout="rsck",
        dtype="f16",
    )  # fmt: skip
    config = dataclasses.replace(config_for(spec), stage_output=True)
    module = _kernel("launch", spec, config)
    (launch,) = _the(module, gpu.LaunchOp)
    assert OVERLAY in launch.attributes
    # The barrier before the fragments go to the staged tile retires the last
    # compute's reads of the tiles it overlays.
    store = next(
        o
        for o in module.walk()
        if isinstance(o, affine.VectorStoreOp)
        and gpu.memory_space(o.memref.type) == gpu.WORKGROUP_ADDRESS_SPACE
    )
    phase = store
    while phase.parent_block() is not launch.body.block:
        phase = phase.parent_op()  # pyright: ignore
    barrier = phase.prev_op
    while not isinstance(barrier, gpu.BarrierOp):
        barrier = barrier.prev_op  # pyright: ignore
    _erase(barrier)
    with pytest.raises(PassError, match="may still be reading"):
        check_shared_memory_hazards(module)


def _fresh_clashes(monkeypatch) -> None:
    """Every overlap of two accesses' points computed anew (no two contents equal)."""
    from affinec.transforms.gpu import thread_overlaps

    monkeypatch.setattr(thread_overlaps.LazyPoints, "content", lambda self: object())


@pytest.mark.parametrize("mutation", ["none", "missing barrier", "early wait"])
def test_repeated_trips_answer_from_the_points_contents_as_computed_anew(
    monkeypatch, mutation
):
    """A stage `%t mod 2` makes trip after trip touch the same elements from the
    same threads: the overlap is computed once per content, and says what it says
    computed every time (nothing, or the same refusal word for word)."""
    from affinec.transforms.gpu import thread_overlaps

    spec = dataclasses.replace(SPEC, c=128)  # 8 reduction trips of 16 channels
    module = _kernel("kernel", spec)
    if mutation == "missing barrier":
        op = _loop_wait(module).next_op
        while not isinstance(op, gpu.BarrierOp):
            op = op.next_op  # pyright: ignore
        _erase(op)
    elif mutation == "early wait":
        _loop_wait(module).properties["numGroups"] = _int32(2)
    computed = []
    clash = thread_overlaps._clash  # pyright: ignore[reportPrivateUsage]

    def counted(*args):
        computed.append(args)
        return clash(*args)

    monkeypatch.setattr(thread_overlaps, "_clash", counted)

    def outcome() -> str:
        computed.clear()
        try:
            check_shared_memory_hazards(module)
        except PassError as e:
            return str(e)
        return "accepted"

    remembered, remembered_count = outcome(), len(computed)
    _fresh_clashes(monkeypatch)
    fresh, fresh_count = outcome(), len(computed)
    assert remembered == fresh
    assert (remembered == "accepted") == (mutation == "none")
    if mutation == "none":  # (a refusal comes in the first trips)
        assert 0 < remembered_count < fresh_count


def test_the_pass_changes_nothing_on_a_correct_kernel():
    module = _kernel("launch")
    before = str(module)
    Pipeline.parse("affinec-verify-shared-memory").run(module)
    assert str(module) == before


def _int32(n: int):
    from xdsl.dialects.builtin import IntegerAttr, i32

    return IntegerAttr(n, i32)


def test_a_deep_pipeline_keeps_the_result():
    # Ten reduction tiles of 16 channels, eight stages: the prologue issues seven
    # groups, each trip waits for all but the newest seven.
    spec = ConvSpec(
        1, 160, 4, 4, 16, 1, 1, layout="nhwc", filter_layout="rsck", dtype="f16"
    )
    config = KernelConfig(
        tile_sizes=(1, 4, 4, 16),
        reduction_tile_sizes=(1, 1, 16),
        reassociate=True,
        mma=True,
        warp_grid=(1, 1),
        stages=8,
    )
    module = build(spec)
    Pipeline(affine_passes(config) + map_to_gpu_passes(config)).run(module, check=True)
    waits = [o for o in module.walk() if isinstance(o, nvgpu.DeviceAsyncWaitOp)]
    assert waits and all(w.groups == 7 for w in waits)


def test_the_compiler_says_what_it_lowered():
    from affinec.driver.compiler import compile_to_ptx

    spec, config = FOUND_FIRST
    config = dataclasses.replace(config, stage_output=True)
    nchw = dataclasses.replace(spec, layout="nchw")
    kernel = compile_to_ptx(nchw, config, arch="sm_90")
    assert any("4 stages asked for 2 tiles: 2 stages" in r for r in kernel.remarks)
    assert any(
        "the output is not staged: the output's innermost index does not run in "
        "aligned 16-byte vectors (8 elements) across the block's 4 values of %ow1" in r
        for r in kernel.remarks
    )
    assert all(": remark: " in r or r.startswith("remark: ") for r in kernel.remarks)


def test_without_verify_each_the_hazards_are_checked_once_by_the_outlining():
    """As the verifier: after every pass when verifying each, else once, by
    `gpu-kernel-outlining` (the last level with structured kernels)."""
    passes = default_passes(CONFIG)
    after = next(k for k, p in enumerate(passes) if p.name == LEVELS["block"]) + 1
    stop = next(k for k, p in enumerate(passes) if p.name == LEVELS["kernel"])
    for verify_each, first_done in ((True, []), (False, passes[after:stop])):
        module = _kernel("block")
        op = _loop_wait(module).next_op
        while not isinstance(op, gpu.BarrierOp):
            op = op.next_op  # pyright: ignore
        _erase(op)
        done: list = []
        with pytest.raises(PassError, match="with no gpu.barrier between"):
            Pipeline(passes[after : stop + 1]).run(
                module, verify_each=verify_each, callback=partial(_record, done)
            )
        assert done == first_done


def _record(done: list, p, _module, _seconds) -> None:
    done.append(p)


# -- which thread touches which element -------------------------------------------------

# The grouped convolution the interpreter found racy while the check passed it: the
# copy of the input and the compute reading it were two thread bands of one loop.
DEPTHWISE = ConvSpec(
    1, 4, 5, 4, 4, 3, 3, padding=1, groups=4, layout="nchw", dtype="f16",
    epilogue="bias,relu6",
)  # fmt: skip


DEPTHWISE_RACE = (
    r"reads %input_shared.*which 'affine.store .*%input_shared.* with no gpu.barrier "
    r"between: other threads' writes may not be visible yet \(thread \(\d+, 0, 0\) "
    r"writes %input_shared\[[\d, ]+\], thread \(\d+, 0, 0\) reads it\)"
)


@pytest.mark.parametrize(
    "stop", ["affinec-map-threads", "affinec-convert-parallel-to-gpu"]
)
def test_a_depthwise_kernel_without_barriers_is_refused(stop):
    passes = default_passes(config_for(DEPTHWISE))
    passes = [p for p in passes if p.name != "affinec-insert-barriers"]
    names = [p.name for p in passes]
    module = build(DEPTHWISE)
    # the passes' own checks left out: the check on what they made
    with hazards_checked_once():
        Pipeline(passes[: names.index(stop) + 1]).run(module, verify_each=False)
    with pytest.raises(PassError, match=DEPTHWISE_RACE):
        check_shared_memory_hazards(module)


@pytest.mark.parametrize("verify_each", [True, False])
def test_the_pipeline_refuses_the_depthwise_kernel_without_barriers(verify_each):
    """By the first pass that checks: affinec-map-threads when verifying after each
    pass, else gpu-kernel-outlining."""
    passes = default_passes(config_for(DEPTHWISE))
    passes = [p for p in passes if p.name != "affinec-insert-barriers"]
    done: list = []
    with pytest.raises(PassError, match=DEPTHWISE_RACE):
        Pipeline(passes).run(
            build(DEPTHWISE), verify_each=verify_each, callback=partial(_record, done)
        )
    refusing = passes[len(done)].name
    expected = "affinec-map-threads" if verify_each else "gpu-kernel-outlining"
    assert refusing == expected


@dataclasses.dataclass(frozen=True)
class _Fails(ModulePass):
    """A pass that fails on any module (a later pass's own error)."""

    name = "test-fails"

    def apply(self, ctx, op) -> None:
        raise PassError(None, "the later pass failed")


@dataclasses.dataclass(frozen=True)
class _Unverifiable(ModulePass):
    """Moves a kernel's first op using a value of its own block before that value's
    definition: LLVM IR can still be made, the verifier refuses it."""

    name = "test-unverifiable"

    def apply(self, ctx, op) -> None:
        from xdsl.ir import OpResult

        from affinec.transforms.gpu.outlining import find_kernels

        for kernel, _ in find_kernels(op):
            for user in kernel.walk():
                for value in user.operands:
                    owner = value.owner
                    if isinstance(value, OpResult) and owner.parent is user.parent:
                        user.detach()
                        owner.parent.insert_op_before(user, owner)  # pyright: ignore
                        return


@pytest.mark.parametrize("later", ["nothing", "a pass", "the verifier"])
def test_a_compile_checks_the_outlined_kernels_beside_llvm_with_the_same_refusal(
    later,
):
    """Verifying once, a compile checks the hazards of the outlined kernels on a
    copy while LLVM writes the PTX (the later passes ran first), with the refusal
    a check at the outlining makes; where a later pass or the verifier fails, the
    hazard is still the error reported."""
    from affinec.driver.compiler import compile_to_ptx

    passes = default_passes(config_for(DEPTHWISE))
    passes = [p for p in passes if p.name != "affinec-insert-barriers"]
    later_fails = later == "a pass"
    if later_fails:
        passes.append(_Fails())
    elif later == "the verifier":
        passes.append(_Unverifiable())
        # with its barriers, the kernel is refused by the verifier
        with pytest.raises(VerificationError, match="does not dominate"):
            compile_to_ptx(
                DEPTHWISE,
                pipeline=[*default_passes(config_for(DEPTHWISE)), _Unverifiable()],
                verify_each=False,
            )
    done: list = []
    with pytest.raises(PassError, match=DEPTHWISE_RACE) as refused:
        compile_to_ptx(
            DEPTHWISE,
            pipeline=passes,
            verify_each=False,
            callback=partial(_record, done),
        )
    outlining = [p.name for p in passes].index("gpu-kernel-outlining")
    assert len(done) == len(passes) - later_fails > outlining + 1
    with pytest.raises(PassError) as at_once:
        Pipeline(passes).run(build(DEPTHWISE), verify_each=False)
    assert str(refused.value) == str(at_once.value)
    # Verifying each pass, the first pass that checks refuses it, as before.
    with pytest.raises(PassError, match=DEPTHWISE_RACE):
        compile_to_ptx(DEPTHWISE, pipeline=passes, verify_each=True)


def _launch(body: str, threads: tuple[int, int, int] = (4, 1, 1)) -> str:
    """A `gpu.launch` of one block of `threads` whose body (with `%tx`, `%ty` and the
    shared `%tile: memref<8xf32, 3>`) is `body`."""
    x, y, z = threads
    return f"""
func.func @f() {{
  %c1 = arith.constant 1 : index
  %x = arith.constant {x} : index
  %y = arith.constant {y} : index
  %z = arith.constant {z} : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %x, %sy = %y, %sz = %z) workgroup(%tile : memref<8xf32, 3 : i64>) {{
    %v = arith.constant 1.0 : f32
{body}
    gpu.terminator
  }}
  func.return
}}
"""


def _hazard(body: str, threads: tuple[int, int, int] = (4, 1, 1)) -> str | None:
    """What the check says of the kernel (None: accepted)."""
    module = parse_module(make_context(), _launch(body, threads))
    try:
        check_shared_memory_hazards(module)
    except PassError as e:
        return str(e)
    return None


def _interpreted_race(body: str, threads: tuple[int, int, int] = (4, 1, 1)) -> bool:
    from affinec.interpreter import Interpreter
    from affinec.interpreter.shared_memory import DataRaceError

    module = parse_module(make_context(), _launch(body, threads))
    try:
        Interpreter(module).run("f")
    except DataRaceError:
        return True
    return False


OWN_ELEMENT = """
    affine.store %v, %tile[%tx] : memref<8xf32, 3 : i64>
    %w = affine.load %tile[%tx] : memref<8xf32, 3 : i64>
"""
NEIGHBOUR = """
    affine.store %v, %tile[%tx] : memref<8xf32, 3 : i64>
    %w = affine.load %tile[(%tx + 1) mod 4] : memref<8xf32, 3 : i64>
"""
NEIGHBOUR_AFTER_A_BARRIER = """
    affine.store %v, %tile[%tx] : memref<8xf32, 3 : i64>
    gpu.barrier
    %w = affine.load %tile[(%tx + 1) mod 4] : memref<8xf32, 3 : i64>
"""
ONE_ELEMENT_FOR_ALL = """
    affine.store %v, %tile[0] : memref<8xf32, 3 : i64>
"""
ACROSS_TRIPS = """
    affine.for %i = 0 to 2 {
      %w = affine.load %tile[%tx + %i] : memref<8xf32, 3 : i64>
      affine.store %w, %tile[%tx + 4] : memref<8xf32, 3 : i64>
    }
"""
DISJOINT_TRIPS = """
    affine.for %i = 0 to 2 {
      %w = affine.load %tile[%tx * 2 + %i] : memref<8xf32, 3 : i64>
      affine.store %w, %tile[%tx * 2 + %i] : memref<8xf32, 3 : i64>
    }
"""


@pytest.mark.parametrize(
    "body, threads, refused",
    [
        (OWN_ELEMENT, (4, 1, 1), None),
        (NEIGHBOUR, (4, 1, 1), r"thread \(0, 0, 0\) writes %tile\[0\], thread \(3, 0, 0\) reads it"),
        (NEIGHBOUR_AFTER_A_BARRIER, (4, 1, 1), None),
        (ONE_ELEMENT_FOR_ALL, (4, 1, 1), "from more than one thread"),
        (ONE_ELEMENT_FOR_ALL, (1, 1, 1), None),
        # %ty names no index: threads (0, 0, 0) and (0, 1, 0) write one element
        (OWN_ELEMENT, (4, 2, 1), r"thread \(0, 0, 0\) writes %tile\[0\], thread \(0, 1, 0\) writes it"),
        (ACROSS_TRIPS, (4, 1, 1), "no gpu.barrier since that read"),
        (DISJOINT_TRIPS, (4, 1, 1), None),
    ],
)  # fmt: skip
def test_the_check_tells_threads_apart_as_the_interpreter_does(body, threads, refused):
    said = _hazard(body, threads)
    if refused is None:
        assert said is None
    else:
        assert said is not None and re.search(refused, said), said
    assert _interpreted_race(body, threads) == (refused is not None)


def test_hoppers_kernels_are_refused_by_name_not_checked():
    """The check has no rules for mbarrier phases, TMA copies and wgmma: it says so
    rather than pass or refuse such a kernel on rules that do not apply (the
    interpreter checks them: tests/test_hopper_interpreter.py)."""
    from affinec.base.spec import MatmulSpec
    from affinec.driver.pipelines import wgmma_passes

    spec = MatmulSpec(64, 16, 32, "f16")
    config = KernelConfig(wgmma=True, wgmma_tile=(64, 16), stages=2)
    module = build(spec)
    target = Pipeline.parse("nvvm-attach-target{chip=sm_90a}").passes
    Pipeline([*target, *wgmma_passes(config)[:1]]).run(module)
    with pytest.raises(PassError, match="not mbarrier phases, TMA copies or wgmma"):
        check_shared_memory_hazards(module)
