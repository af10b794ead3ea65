"""`affinec-warp-specialize`: a producer warpgroup issuing the TMA loads, the block's
warpgroups only waiting, multiplying and handing the stages back, proven on the CPU.

Random products (and a 1x1 convolution through its flattened pixels) through the
whole pipeline with the pass, every pass's output interpreted against float64; the
pass's output printed and parsed again; negative controls the interpreter and the
pass's concurrent phase check catch (the producer's wait on a release removed, a
consumer's wait on the wrong parity, a release never arrived, a register
reallocation some threads skip); refusals; the PTX through ptxas for sm_90a
(setmaxnreg, no spills; USETMAXREG in the SASS where cuobjdump is installed); on
128x256 tiles with the output staged, the accumulators read only after the
consumers' last wgmma wait (the emitter's fence; without it LLVM converts them
before the wait and ptxas serializes the wgmmas, C7514).
"""

import functools
from dataclasses import replace

import pytest
from built_once import built_once
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.parser import Parser

from affinec.backend.sass import sass as sass_instructions
from affinec.backend.sass import sass_available
from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.dialects import affine, gpu, nvgpu, nvvm
from affinec.dialects.affinec import GRID, THREAD, mapping_of
from affinec.dialects.affinec_wgmma import WarpgroupMmaStepOp
from affinec.driver.checking import Checker
from affinec.driver.config import KernelConfig
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.ir.context import make_context
from affinec.passes.affinec_warp_specialize import AffinecWarpSpecialize
from affinec.transforms.gpu.warp_specialize_phases import check_specialized_phases

TARGET = "nvvm-attach-target{chip=sm_90a}"


def _config(**knobs) -> KernelConfig:
    base = KernelConfig(
        tile_sizes=(128, 32),
        reduction_tile_sizes=(16,),
        mma=True,
        tensor_core="wgmma",
        tma=True,
        stages=2,
        warp_specialize=True,
    )
    return replace(base, **knobs)


def _passes(config: KernelConfig, target: str = TARGET) -> list:
    return [*Pipeline.parse(target).passes, *default_passes(config)]


@st.composite
def cases(draw):
    """A small product TMA loads (partial tiles included) and a configuration: one
    or two consumer warpgroups, 1 to 4 stages, MMAs in flight or waited, the output
    staged through shared memory or not."""
    bm = 64 * draw(st.integers(1, 2))
    bn = 8 * draw(st.integers(1, 3))
    m = draw(st.integers(bm, bm + 24))
    n = 8 * draw(st.integers(bn // 8, bn // 8 + 1))
    k = 16 * draw(st.integers(2, 5))
    spec = MatmulSpec(m, n, k, "f16", draw(st.sampled_from(["none", "bias-relu"])))
    stages = draw(st.integers(1, 4))
    config = _config(
        tile_sizes=(bm, bn),
        stages=stages,
        in_flight=stages >= 3 and draw(st.booleans()),
        stage_output=draw(st.booleans()),
    )
    return spec, config


@settings(max_examples=max(4, settings().max_examples // 3), deadline=None)
@given(cases())
def test_a_producer_warpgroup_keeps_the_result(case):
    spec, config = case
    module = build(spec)
    Pipeline(_passes(config)).run(module, check=True)
    text = str(module)
    assert "nvvm.setmaxregister decrease 56" in text
    assert "nvvm.setmaxregister increase" in text
    consumers = config.tile_sizes[0] // 64
    launch = f"block = array<i64: {128 * (consumers + 1)}, 1, 1>"
    assert launch in text


def test_a_1x1_convolution_through_its_flattened_pixels():
    from affinec.driver.compiler import compile_to_ptx

    spec = ConvSpec(2, 32, 6, 6, 40, 1, 1, layout="nhwc", filter_layout="rsck",
                    dtype="f16", epilogue="bias-relu")  # fmt: skip
    config = _config(
        tile_sizes=(64, 40), reduction_tile_sizes=(16,), flatten_pixels=True
    )
    compiled = compile_to_ptx(spec, config, arch="sm_90a", check=True)
    assert "setmaxnreg.dec.sync.aligned.u32 \t56;" in compiled.ptx
    # one consumer warpgroup: the most registers setmaxnreg gives a thread
    assert "setmaxnreg.inc.sync.aligned.u32 \t240;" in compiled.ptx
    assert compiled.launch.block == (256, 1, 1)


def test_a_padded_3x3_convolution_by_descriptor():
    # each tap's input box loaded by TMA (its padding TMA's zero fill), 9 taps of
    # 64 channels a step: the producer runs the taps' loads ahead
    from affinec.driver.compiler import compile_to_ptx

    spec = ConvSpec(1, 64, 8, 8, 64, 3, 3, padding=(1, 1), layout="nhwc",
                    filter_layout="rsck", dtype="f16")  # fmt: skip
    config = _config(
        tile_sizes=(1, 8, 8, 64), reduction_tile_sizes=(1, 1, 64), reassociate=True
    )
    compiled = compile_to_ptx(spec, config, arch="sm_90a", check=True)
    assert "setmaxnreg.dec.sync.aligned.u32" in compiled.ptx
    assert "cp.async.bulk.tensor.4d" in compiled.ptx
    assert compiled.launch.block == (256, 1, 1)


def _specialized(spec, config):
    """The module through affinec-warp-specialize, checked (once per spec and
    configuration)."""

    def make():
        passes = _passes(config)
        at = [p.name for p in passes].index("affinec-warp-specialize")
        module = build(spec)
        Pipeline(passes[: at + 1]).run(module, check=True)
        return module

    return built_once(("specialized", spec, config), make)


def _grid(module):
    return next(
        o
        for o in module.walk()
        if isinstance(o, affine.ParallelOp) and mapping_of(o) == GRID
    )


SMALL = MatmulSpec(128, 32, 96, "f16")


def test_the_output_prints_and_parses_again():
    module = _specialized(SMALL, _config(stages=3, in_flight=True))
    text = str(module)
    again = Parser(make_context(), text).parse_module()
    again.verify()
    assert str(again) == text
    assert Checker(SMALL).check("parsed", again).ok


def test_the_producer_issues_every_load():
    module = _specialized(SMALL, _config(stages=3, in_flight=True))
    (branch,) = [
        o
        for o in module.walk()
        if isinstance(o, affine.IfOp)
        and any(isinstance(x, nvvm.SetMaxRegisterOp) for x in o.then_region.ops)
    ]
    producer, consumers = (
        list(branch.then_region.walk()),
        list(branch.else_region.walk()),
    )
    loads = [o for o in module.walk() if isinstance(o, nvgpu.TmaAsyncLoadOp)]
    assert loads and all(o in producer for o in loads)
    assert not any(isinstance(o, WarpgroupMmaStepOp) for o in producer)
    assert any(isinstance(o, WarpgroupMmaStepOp) for o in consumers)
    waits = [o for o in producer if isinstance(o, nvgpu.MBarrierTryWaitParityOp)]
    assert waits and all(w.barriers.name_hint == "stage_released" for w in waits)
    arrivals = [o for o in consumers if isinstance(o, nvgpu.MBarrierArriveOp)]
    assert arrivals and not any(isinstance(o, nvgpu.TmaAsyncLoadOp) for o in consumers)


def test_a_staged_epilogue_keeps_the_accumulators_in_the_consumers_branch():
    # the output staged through shared memory over the stages: the consumers store
    # their fragments after a barrier of their own (an mbarrier, one arrival a
    # warpgroup), and the block meets at a gpu.barrier only once they are stored
    module = _specialized(SMALL, _config(stages=3, in_flight=True, stage_output=True))
    (band,) = [
        o
        for o in module.walk()
        if isinstance(o, affine.ParallelOp)
        and mapping_of(o) == THREAD
        and any(isinstance(x, nvvm.SetMaxRegisterOp) for x in o.walk())
    ]
    inside = list(band.walk())
    assert not any(isinstance(o, gpu.BarrierOp) for o in inside)
    done = [
        o
        for o in inside
        if isinstance(o, nvgpu.MBarrierArriveOp | nvgpu.MBarrierTryWaitParityOp)
        and o.barriers.name_hint == "consumers_done"
    ]
    assert len(done) == 2
    stores = [
        o
        for o in inside
        if isinstance(o, affine.StoreOp | affine.VectorStoreOp)
        and o.operands[1].name_hint == "output_shared"
    ]
    assert stores and all(inside.index(o) > inside.index(done[1]) for o in stores)
    after = list(band.next_op.walk()) if band.next_op else []
    assert any(isinstance(o, gpu.BarrierOp) for o in [band.next_op, *after])


# -- negative controls --------------------------------------------------------------


def _erase(ops) -> None:
    for op in ops:
        op.detach()
        op.erase()


@pytest.mark.parametrize("stages", [1, 2])
def test_a_load_onto_a_stage_not_handed_back_is_caught(stages):
    spec = SMALL
    module = _specialized(spec, _config(stages=stages))
    _erase(
        o
        for o in module.walk()
        if isinstance(o, nvgpu.MBarrierTryWaitParityOp)
        and o.barriers.name_hint == "stage_released"
    )
    with pytest.raises(PassError, match="no wait has seen handed back"):
        check_specialized_phases(_grid(module))
    result = Checker(spec).check("not handed back", module)
    assert not result.ok, result.row()


def test_a_consumers_wait_on_the_wrong_parity_is_caught():
    spec = SMALL
    module = _specialized(spec, _config(stages=2))
    for wait in module.walk():
        if (
            isinstance(wait, nvgpu.MBarrierTryWaitParityOp)
            and wait.barriers.name_hint == "stage_barriers"
        ):
            odd = wait.phaseParity.owner
            assert isinstance(odd, arith.CmpiOp)
            odd.properties["predicate"] = IntegerAttr(1, i64)  # eq -> ne
    with pytest.raises(PassError, match="waits on parity"):
        check_specialized_phases(_grid(module))
    result = Checker(spec).check("wrong parity", module)
    assert not result.ok, result.row()


def test_a_release_never_arrived_is_caught():
    # the consumers hand no stage back: the producer waits forever for the release
    spec = SMALL
    module = _specialized(spec, _config(stages=2))
    _erase([o for o in module.walk() if isinstance(o, nvgpu.MBarrierArriveOp)])
    with pytest.raises(PassError, match="nothing completes"):
        check_specialized_phases(_grid(module))
    result = Checker(spec).check("never released", module)
    assert not result.ok, result.row()


def test_a_register_reallocation_some_threads_skip_is_caught():
    # setmaxnreg is .sync.aligned: the whole warpgroup executes it
    spec = SMALL
    module = _specialized(spec, _config(stages=2))
    (decrease,) = [
        o
        for o in module.walk()
        if isinstance(o, nvvm.SetMaxRegisterOp) and o.action.data == "decrease"
    ]
    guarded = next(
        o
        for o in module.walk()
        if isinstance(o, affine.IfOp)
        and any(isinstance(x, nvgpu.TmaAsyncLoadOp) for x in o.walk())
        and len(o.args) == 1
        and o.parent_op() is decrease.parent_op()
    )
    decrease.detach()
    guarded.then_region.block.insert_op_before(
        decrease, guarded.then_region.block.first_op
    )
    # the one thread at the reallocation waits for its warpgroup forever, so no
    # load is issued and the consumers wait forever too
    result = Checker(spec).check("one thread reallocates", module)
    assert not result.ok, result.row()
    assert "waits forever" in result.message


# -- refusals -----------------------------------------------------------------------


def test_registers_the_multiprocessor_lacks_are_refused():
    config = _config(stages=2)
    passes = [
        AffinecWarpSpecialize(consumer_registers=256)
        if p.name == "affinec-warp-specialize"
        else p
        for p in _passes(config)
    ]
    with pytest.raises(PassError, match="more than the 65536"):
        Pipeline(passes).run(build(SMALL))


@pytest.mark.parametrize("count", [16, 60, 264])
def test_register_counts_setmaxnreg_cannot_take_are_refused(count):
    config = _config(stages=2)
    passes = [
        AffinecWarpSpecialize(producer_registers=count)
        if p.name == "affinec-warp-specialize"
        else p
        for p in _passes(config)
    ]
    with pytest.raises(PassError, match="multiple of 8 from 24 to 256"):
        Pipeline(passes).run(build(SMALL))


def test_the_knob_needs_tma():
    with pytest.raises(ValueError, match="needs tensor-core=wgmma and tma"):
        _config(tma=False)
    plain = _config(warp_specialize=False)
    assert "affinec-warp-specialize" not in [p.name for p in default_passes(plain)]


def test_the_op_verifies_its_register_count():
    from xdsl.utils.exceptions import VerifyException

    with pytest.raises(VerifyException, match="multiple of 8 from 24 to 256"):
        nvvm.SetMaxRegisterOp("increase", 230).verify()
    with pytest.raises(VerifyException, match="increase or decrease"):
        nvvm.SetMaxRegisterOp("more", 232).verify()


# -- PTX ----------------------------------------------------------------------------


def test_the_ptx_assembles_for_sm_90a_without_spills():
    from affinec.backend.ptxas import assemble, find_ptxas
    from affinec.driver.compiler import compile_to_ptx

    ptxas = find_ptxas()
    if ptxas is None:
        pytest.skip("ptxas is not installed")
    spec = MatmulSpec(4096, 4096, 1024, "f16")
    config = _config(
        tile_sizes=(128, 128),
        reduction_tile_sizes=(64,),
        stages=4,
        in_flight=True,
        stage_output=True,
    )
    compiled = compile_to_ptx(spec, config, arch="sm_90a")
    ptx = compiled.ptx
    assert "setmaxnreg.dec.sync.aligned.u32 \t56;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 \t224;" in ptx
    assert compiled.launch.block == (384, 1, 1)
    (resources,) = assemble(ptx, "sm_90a").values()
    assert resources.spill_stores == resources.spill_loads == 0
    assert resources.stack_frame == 0
    # no wgmma serialized (C7510-C7518); ptxas's own wgmma fence (C7519) is benign
    assert not [a for a in resources.advisories if not a.startswith("C7519")]
    if not sass_available():
        return
    sass = "\n".join(sass_instructions(ptx, "sm_90a"))
    assert "USETMAXREG.DEALLOC.CTAPOOL 0x38" in sass
    assert "USETMAXREG.TRY_ALLOC.CTAPOOL" in sass and "0xe0" in sass


WIDE = MatmulSpec(4096, 4096, 1024, "f16")
"""A product on 128x256 tiles, its output staged through shared memory: each
consumer warpgroup's 64x256 accumulator is 128 registers a thread."""

WIDE_CONFIG = _config(
    tile_sizes=(128, 256),
    reduction_tile_sizes=(64,),
    stages=3,
    in_flight=True,
    stage_output=True,
)


@functools.cache
def _wide():
    from affinec.driver.compiler import compile_to_ptx

    return compile_to_ptx(WIDE, WIDE_CONFIG, arch="sm_90a")


def _reads_before_the_last_wait(ptx: str) -> tuple[int, int]:
    """How many of the PTX's f32-to-f16 conversions (the epilogue's reads of the
    accumulators) come before its last `wgmma.wait_group 0`, of how many."""
    lines = ptx.splitlines()
    last = max(
        k for k, line in enumerate(lines) if "wgmma.wait_group.sync.aligned \t0" in line
    )
    reads = [k for k, line in enumerate(lines) if "cvt.rn.f16" in line]
    return sum(k < last for k in reads), len(reads)


def test_the_accumulators_are_read_after_the_last_wgmma_wait():
    # LLVM keeps the epilogue's conversions after the consumers' wait for all
    # their wgmmas: the accumulator values pass through an empty inline statement
    # after the wait (one per wait of its own, none after a step's waits)
    compiled = _wide()
    before, reads = _reads_before_the_last_wait(compiled.ptx)
    assert reads and before == 0
    ir = compiled.llvm_ir
    wait = ir.index('wgmma.wait_group.sync.aligned"(i64 0)')
    fences = [k for k in range(len(ir)) if ir.startswith('asm sideeffect "", ', k)]
    assert len(fences) == 1 and fences[0] > wait
    constraints = ir[fences[0] :].split('"')[3].split(",")
    assert constraints == ["=f"] * 128 + [str(k) for k in range(128)]


def test_a_steps_own_wait_gets_no_fence():
    # each step waiting for its wgmmas stores their results after its wait: a
    # fence there would read the buffer before them, so none is written
    from affinec.driver.compiler import compile_to_ptx

    config = _config(
        tile_sizes=(128, 128), reduction_tile_sizes=(64,), stages=2, in_flight=False
    )
    for specialized in (False, True):
        compiled = compile_to_ptx(
            MatmulSpec(256, 256, 256, "f16"),
            replace(config, warp_specialize=specialized),
            arch="sm_90a",
        )
        ir = compiled.llvm_ir
        assert 'wgmma.wait_group.sync.aligned"(i64 0)' in ir
        assert 'asm sideeffect "", ' not in ir


def test_without_the_fence_llvm_converts_the_accumulators_in_flight(monkeypatch):
    # the negative control: with no fence, LLVM (InstCombine) moves the
    # conversions into the reduction loop's exit, before the wait
    import affinec.backend.llvm_walk as walk
    from affinec.driver.compiler import compile_to_ptx

    monkeypatch.setattr(walk, "completes_accumulators", lambda op: False)
    ptx = compile_to_ptx(WIDE, WIDE_CONFIG, arch="sm_90a").ptx
    before, reads = _reads_before_the_last_wait(ptx)
    assert reads and before == reads
    from affinec.backend.ptxas import assemble, find_ptxas

    if find_ptxas() is not None:  # and ptxas serializes the wgmmas for it
        (resources,) = assemble(ptx, "sm_90a").values()
        assert [a for a in resources.advisories if a.startswith("C7514")]


def test_the_wide_staged_kernel_assembles_without_serializing_its_wgmmas():
    from affinec.backend.ptxas import assemble, find_ptxas

    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    (resources,) = assemble(_wide().ptx, "sm_90a").values()
    # C7514 (a non-wgmma instruction reading an accumulator in flight) serialized
    # every wgmma of this kernel; ptxas's own wgmma fence (C7519) is benign
    assert not [a for a in resources.advisories if not a.startswith("C7519")]
    assert resources.spill_stores == resources.spill_loads == 0
    # the launch's 384 threads leave each 168 registers; the consumers' 128
    # accumulator registers and the rest fit in them before setmaxnreg adds any
    assert resources.registers <= 168


def test_the_command_line_takes_warp_specialization(tmp_path, capsys):
    from affinec.tools.cli import main as affinec

    out = tmp_path / "k.ptx"
    args = ["compile", "matmul", "--m", "256", "--n", "128", "--k", "128",
            "--dtype", "f16", "--arch", "sm_90a", "--mma", "--tensor-core", "wgmma",
            "--tile-sizes", "128,128", "--reduction-tile-sizes", "64",
            "--stages", "2", "--tma", "-o", str(out)]  # fmt: skip
    assert affinec([*args, "--warp-specialize"]) == 0, capsys.readouterr().err
    assert "setmaxnreg.dec.sync.aligned.u32" in out.read_text()
    assert affinec(args) == 0, capsys.readouterr().err
    assert "setmaxnreg" not in out.read_text()
