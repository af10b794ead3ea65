"""`affinec-tma-copies`: the tiles `affinec-wgmma` reads loaded by TMA on mbarrier
stages, proven on the CPU.

Random products through the whole pipeline with the pass, every pass's output
interpreted against float64; the layout TMA writes (column slabs) read by the
lowered `wgmma` through its descriptors; negative controls the interpreter and the
pass's own phase check catch (a wait on the wrong parity, a missing
`arrive.expect_tx`, a wrong descriptor field); refusals, located; the PTX through
ptxas for sm_90a (TMA and HGMMA in the SASS where cuobjdump is installed).
"""

from dataclasses import replace

import pytest
from built_once import built_once
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_edits import set_i64_constant
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType, i64

from affinec.backend.sass import sass as sass_instructions
from affinec.backend.sass import sass_available
from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.dialects import affine, nvgpu
from affinec.dialects.affinec import GRID, mapping_of
from affinec.dialects.affinec_wgmma import WarpgroupMmaStepOp
from affinec.driver.checking import Checker
from affinec.driver.config import KernelConfig
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.hardware.wgmma_layouts import MatrixDescriptor
from affinec.transforms.gpu.wgmma_tma_phases import check_phases
from affinec.transforms.nvvm.wgmma_steps import wgmma_fields

TARGET = "nvvm-attach-target{chip=sm_90a}"


def _config(**knobs) -> KernelConfig:
    base = KernelConfig(
        tile_sizes=(64, 64),
        reduction_tile_sizes=(32,),
        mma=True,
        tensor_core="wgmma",
        tma=True,
        stages=2,
    )
    return replace(base, **knobs)


def _passes(config: KernelConfig, target: str = TARGET) -> list:
    return [*Pipeline.parse(target).passes, *default_passes(config)]


@st.composite
def tma_cases(draw):
    """A product TMA loads (its rows 16 bytes apart), partial tiles included, and a
    configuration of it."""
    bm = 64 * draw(st.integers(1, 2))
    bn = 8 * draw(st.integers(1, 6))
    bk = draw(st.sampled_from([16, 32]))
    m = draw(st.integers(bm, bm + 40))
    n = 8 * draw(st.integers(bn // 8, bn // 8 + 2))
    k = 16 * draw(st.integers(bk // 16, 3 * bk // 16))
    spec = MatmulSpec(m, n, k, "f16", draw(st.sampled_from(["none", "bias-relu"])))
    config = _config(
        tile_sizes=(bm, bn),
        reduction_tile_sizes=(bk,),
        stages=draw(st.integers(1, 3)),
        stage_output=draw(st.booleans()),
    )
    return spec, config


@settings(max_examples=max(3, settings().max_examples // 4))  # ~20 stages each
@given(tma_cases())
def test_tma_loads_keep_the_result(case):
    spec, config = case
    module = build(spec)
    Pipeline(_passes(config)).run(module, check=True)
    text = str(module)
    assert "nvvm.cp.async.bulk.tensor.shared.cluster.global" in text
    assert "nvvm.mbarrier.try_wait.parity" in text
    assert "cp.async.wait.group" not in text  # no cp.async copy left
    assert "nvvm.wgmma.mma_async" in text


def test_a_1x1_convolution_through_its_flattened_pixels():
    from affinec.driver.compiler import compile_to_ptx

    spec = ConvSpec(2, 32, 6, 6, 40, 1, 1, layout="nhwc", filter_layout="rsck",
                    dtype="f16", epilogue="bias-relu")  # fmt: skip
    config = _config(
        tile_sizes=(64, 40), reduction_tile_sizes=(16,), flatten_pixels=True
    )
    compiled = compile_to_ptx(spec, config, arch="sm_90a", check=True)
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in compiled.ptx
    assert "wgmma.mma_async.sync.aligned.m64n40k16.f32.f16.f16" in compiled.ptx
    maps = [m for m in compiled.runtime_kernel().launches[0].tensor_maps if m]
    # A's 64x16 tile one slab of 32-byte rows (swizzled so); B's 16x40, whose rows
    # of 80 bytes no swizzle span divides, 5 slabs of 16 bytes
    assert [(m.box, m.swizzle) for m in maps] == [((64, 16), 32), ((16, 8), 0)]


# -- negative controls --------------------------------------------------------------


def _loaded(spec, config):
    """The module through affinec-tma-copies, checked (once for each spec and
    configuration: three negative controls start from the same one)."""

    def make():
        passes = _passes(config)
        at = [p.name for p in passes].index("affinec-tma-copies")
        module = build(spec)
        Pipeline(passes[: at + 1]).run(module)
        assert Checker(spec).check("loaded", module).ok
        return module

    return built_once(("loaded", spec, config), make)


def _grid(module):
    return next(
        o
        for o in module.walk()
        if isinstance(o, affine.ParallelOp) and mapping_of(o) == GRID
    )


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_a_wait_on_the_wrong_parity_is_caught(stages):
    spec = MatmulSpec(64, 64, 128, "f16")
    module = _loaded(spec, _config(stages=stages))
    check_phases(_grid(module))
    wait = next(
        o for o in module.walk() if isinstance(o, nvgpu.MBarrierTryWaitParityOp)
    )
    odd = wait.phaseParity.owner
    assert isinstance(odd, arith.CmpiOp)
    odd.properties["predicate"] = IntegerAttr(1, i64)  # eq -> ne: the other phase
    with pytest.raises(PassError, match="waits on parity"):
        check_phases(_grid(module))
    result = Checker(spec).check("wrong parity", module)
    assert not result.ok, result.row()


def test_a_missing_expect_tx_is_caught():
    spec = MatmulSpec(64, 64, 128, "f16")
    module = _loaded(spec, _config())
    arrive = next(
        o for o in module.walk() if isinstance(o, nvgpu.MBarrierArriveExpectTxOp)
    )
    arrive.detach()
    arrive.erase()
    with pytest.raises(PassError, match="whose load has not been issued"):
        check_phases(_grid(module))
    result = Checker(spec).check("no expect_tx", module)
    assert not result.ok, result.row()


def test_a_load_onto_a_stage_not_yet_read_is_caught():
    # the pipelined loop's load moved after the last wait's stage
    spec = MatmulSpec(64, 64, 128, "f16")
    module = _loaded(spec, _config(stages=2))
    waits = [o for o in module.walk() if isinstance(o, nvgpu.MBarrierTryWaitParityOp)]
    for w in waits:
        w.detach()
        w.erase()
    with pytest.raises(PassError, match="no wait has seen"):
        check_phases(_grid(module))


def _released_waits(module):
    return [
        o
        for o in module.walk()
        if isinstance(o, nvgpu.MBarrierTryWaitParityOp)
        and o.barriers.name_hint == "stage_released"
    ]


@pytest.mark.parametrize("stages", [1, 2])
def test_a_load_onto_a_stage_not_handed_back_is_caught(stages):
    # two warpgroups, no gpu.barrier guarding the stages: without its wait on the
    # stage's release, the loading thread overwrites a stage the other warpgroup
    # may still read
    spec = MatmulSpec(128, 64, 128, "f16")
    module = _loaded(spec, _config(stages=stages, tile_sizes=(128, 64)))
    assert not [
        o
        for o in module.walk()
        if type(o).__name__ == "BarrierOp" and isinstance(o.parent_op(), affine.ForOp)
    ]
    waits = _released_waits(module)
    assert waits
    for w in waits:
        w.detach()
        w.erase()
    with pytest.raises(PassError, match="no wait has seen handed back"):
        check_phases(_grid(module))
    result = Checker(spec).check("not handed back", module)
    assert not result.ok, result.row()


def test_a_wait_for_the_release_on_the_wrong_parity_is_caught():
    spec = MatmulSpec(128, 64, 128, "f16")
    module = _loaded(spec, _config(stages=2, tile_sizes=(128, 64)))
    for w in _released_waits(module):
        odd = w.phaseParity.owner
        assert isinstance(odd, arith.CmpiOp)
        odd.properties["predicate"] = IntegerAttr(1, i64)
    with pytest.raises(PassError, match="waits on parity"):
        check_phases(_grid(module))
    result = Checker(spec).check("wrong release parity", module)
    assert not result.ok, result.row()


def _swizzle_off(config):
    """The pipeline of `config` with affinec-tma-copies{swizzle=false}."""
    from affinec.passes.affinec_tma_copies import AffinecTmaCopies

    return [
        AffinecTmaCopies(swizzle=False) if p.name == "affinec-tma-copies" else p
        for p in _passes(config)
    ]


@pytest.mark.parametrize("swizzle", [True, False])
@pytest.mark.parametrize("operand", ["A", "B"])
def test_a_wrong_descriptor_field_of_a_slab_tile_gives_a_wrong_answer(operand, swizzle):
    spec = MatmulSpec(64, 64, 64, "f16")
    checker = Checker(spec)

    def make():
        module = build(spec)
        passes = _passes(_config()) if swizzle else _swizzle_off(_config())
        Pipeline(passes).run(module)
        assert checker.check("lowered", module).ok
        return module

    # A's and B's fields edited in one lowered module each way (built once)
    module = built_once(("slab descriptors", swizzle), make)
    # A is 64x32 K-major, B 32x64 MN-major: swap the fields' two offsets (in slabs
    # of 64- and 128-byte rows swizzled, or of 16-byte rows)
    rows, cols, k_major = (64, 32, True) if operand == "A" else (32, 64, False)
    span = (64 if operand == "A" else 128) if swizzle else 16
    fields, _ = wgmma_fields(rows, cols, k_major, -span)
    assert fields.swizzle == (span if swizzle else 0)
    swapped = MatrixDescriptor(0, fields.stride, fields.leading, fields.swizzle)
    assert set_i64_constant(module, fields.encode(), swapped.encode()) == 1
    assert not checker.check("swapped", module).ok


def test_the_tiles_are_laid_out_in_slabs():
    spec = MatmulSpec(128, 64, 64, "f16")

    def shapes(passes, spec=spec):
        at = [p.name for p in passes].index("affinec-tma-copies")
        module = build(spec)
        Pipeline(passes[: at + 1]).run(module, check=True)
        return {
            v.name_hint: v.type.get_shape()
            for op in module.walk()
            for v in op.results
            if isinstance(v.type, MemRefType)
            and v.name_hint in ("A_shared", "B_shared")
        }

    # swizzled: A's rows of 32 columns one slab of 64 bytes, B's of 64 one of 128
    assert shapes(_passes(_config())) == {
        "A_shared": (2, 1, 64, 32),
        "B_shared": (2, 1, 32, 64),
    }
    wide = _config(tile_sizes=(64, 128), reduction_tile_sizes=(64,))
    assert shapes(_passes(wide), MatmulSpec(64, 128, 256, "f16")) == {
        "A_shared": (2, 1, 64, 64),
        "B_shared": (2, 2, 64, 64),
    }
    assert shapes(_swizzle_off(_config())) == {
        "A_shared": (2, 4, 64, 8),
        "B_shared": (2, 8, 32, 8),
    }


def test_a_tile_its_step_zeroes_keeps_unswizzled_slabs():
    # K = 48 in steps of 32: the last step zeroes its tiles past the channels with
    # element stores, which see no swizzle
    spec = MatmulSpec(64, 64, 48, "f16")
    module = build(spec)
    Pipeline(_passes(_config(stages=1))).run(module, check=True)
    assert "swizzle = none" in str(module)


# -- refusals -----------------------------------------------------------------------


def test_rows_tma_cannot_stride_are_refused_located():
    spec = MatmulSpec(64, 64, 36, "f16")  # A's rows 72 bytes apart
    module = build(spec)
    with pytest.raises(PassError, match="TMA needs a multiple of 16"):
        Pipeline(_passes(_config(reduction_tile_sizes=(16,)))).run(module)


def test_separated_partial_tiles_are_refused_saying_what_to_do():
    # the full and partial versions of a block are chosen by its place in the grid:
    # the phase check cannot run the block's program trip by trip
    spec = MatmulSpec(150, 72, 96, "f16")
    config = _config(separate=True, tile_sizes=(64, 40))
    with pytest.raises(PassError, match="keep the cp.async copies there"):
        Pipeline(_passes(config)).run(build(spec))
    Pipeline(_passes(replace(config, tma=False))).run(build(spec))


def test_other_chips_and_routes_are_left_alone():
    config = _config(tma=False)
    assert "affinec-tma-copies" not in [p.name for p in default_passes(config)]
    mma = KernelConfig(mma=True, tile_sizes=(64, 64), reduction_tile_sizes=(32,))
    assert "affinec-tma-copies" not in [p.name for p in default_passes(mma)]


# -- PTX ----------------------------------------------------------------------------


def test_the_ptx_assembles_for_sm_90a_with_tma_and_hgmma():
    from affinec.backend.ptxas import assemble, find_ptxas
    from affinec.driver.compiler import compile_to_ptx

    ptxas = find_ptxas()
    if ptxas is None:
        pytest.skip("ptxas is not installed")
    spec = MatmulSpec(4096, 4096, 1024, "f16")
    config = _config(
        tile_sizes=(128, 128), reduction_tile_sizes=(64,), stages=3, stage_output=True
    )
    ptx = compile_to_ptx(spec, config, arch="sm_90a").ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    (resources,) = assemble(ptx, "sm_90a").values()
    assert resources.spill_stores == resources.spill_loads == 0
    assert resources.stack_frame == 0
    if not sass_available():
        return
    sass = "\n".join(sass_instructions(ptx, "sm_90a"))
    assert "UTMALDG.2D" in sass and "HGMMA.64x128x16.F32" in sass
    assert "LDGSTS" not in sass  # no cp.async left


def test_the_command_line_takes_tma_on_request(tmp_path, capsys):
    from affinec.tools.cli import main as affinec

    out = tmp_path / "k.ptx"
    args = ["compile", "matmul", "--m", "256", "--n", "128", "--k", "128",
            "--dtype", "f16", "--arch", "sm_90a", "--mma", "--tensor-core", "wgmma",
            "--tile-sizes", "128,128", "--reduction-tile-sizes", "64",
            "--stages", "2", "-o", str(out)]  # fmt: skip
    assert affinec([*args, "--tma"]) == 0, capsys.readouterr().err
    assert "cp.async.bulk.tensor" in out.read_text()
    assert affinec(args) == 0, capsys.readouterr().err
    text = out.read_text()
    assert "cp.async.bulk.tensor" not in text and "cp.async.ca.shared.global" in text


# -- MMAs left in flight --------------------------------------------------------------


def _in_flight(config):
    """The pipeline of `config` with affinec-tma-copies{in-flight=true}."""
    from affinec.passes.affinec_tma_copies import AffinecTmaCopies

    return [
        AffinecTmaCopies(in_flight=True) if p.name == "affinec-tma-copies" else p
        for p in _passes(config)
    ]


@settings(max_examples=max(3, settings().max_examples // 4))
@given(tma_cases(), st.integers(3, 4))
def test_mmas_left_in_flight_keep_the_result(case, stages):
    spec, config = case
    module = build(spec)
    Pipeline(_in_flight(replace(config, stages=stages))).run(module, check=True)
    text = str(module)
    if "affine.for" in text or "cf.br" in text:  # a loop of steps: left in flight
        assert "nvvm.wgmma.wait.group.sync.aligned 1" in text


def test_a_stage_handed_back_while_its_mmas_run_is_caught():
    # the steps left in flight, but each hands its own stage back at once (as a
    # step that waits for its MMAs may): the load that reuses the stage lands on
    # what the MMAs may still read
    spec = MatmulSpec(128, 64, 256, "f16")
    config = _config(stages=3, tile_sizes=(128, 64))
    module = build(spec)
    passes = _passes(config)
    at = [p.name for p in passes].index("affinec-tma-copies")
    Pipeline(passes[: at + 1]).run(module)
    steps = [o for o in module.walk() if isinstance(o, WarpgroupMmaStepOp)]
    loop = next(
        o
        for o in module.walk()
        if isinstance(o, affine.ForOp) and steps[0] in list(o.walk())
    )
    for step in steps:
        step.properties["pending"] = IntegerAttr(1, i64)
    from affinec.dialects import nvvm

    waiting = steps[0].parent_op().clone()
    body = waiting.body.block
    for op in reversed(list(body.ops)[:-1]):
        op.detach()
        op.erase()
    body.insert_op_before(nvvm.WgmmaWaitGroupSyncOp(0), body.last_op)
    loop.parent_block().insert_op_after(waiting, loop)
    result = Checker(spec).check("handed back early", module)
    assert not result.ok, result.row()
    assert "may still be reading" in result.message


def test_mmas_left_in_flight_assemble_without_serializing():
    from affinec.backend.ptxas import assemble, find_ptxas
    from affinec.driver.compiler import compile_to_ptx

    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    spec = MatmulSpec(4096, 4096, 1024, "f16")
    config = _config(
        tile_sizes=(128, 128), reduction_tile_sizes=(64,), stages=4, stage_output=True
    )
    ptx = compile_to_ptx(spec, config, arch="sm_90a", pipeline=_in_flight(config)).ptx
    assert "wgmma.wait_group.sync.aligned \t1;" in ptx
    (resources,) = assemble(ptx, "sm_90a").values()
    assert resources.spill_stores == resources.spill_loads == 0
    # no wgmma serialized, no wait inserted by ptxas (C7510-C7515)
    assert not [a for a in resources.advisories if not a.startswith("C7519")]


def test_tma_alone_with_the_tensor_core_takes_config_fors_tiles(tmp_path, capsys):
    from affinec.tools.cli import main as affinec

    out = tmp_path / "k.ptx"
    args = ["compile", "matmul", "--m", "512", "--n", "512", "--k", "256",
            "--dtype", "f16", "--arch", "sm_90a", "-o", str(out)]  # fmt: skip
    assert affinec([*args, "--tensor-core", "wgmma", "--tma"]) == 0
    assert "cp.async.bulk.tensor" in out.read_text()
    assert affinec([*args, "--tma"]) == 1  # nothing to load by TMA on mma.sync
    assert "--tma applies to the tiles and MMAs of affinec-wgmma" in (
        capsys.readouterr().err
    )
    # the rule sm_90a's products take: TMA, each step's MMAs in flight
    assert affinec([*args, "--tensor-core", "wgmma", "--tma", "--in-flight"]) == 0
    assert "wgmma.wait_group.sync.aligned \t1;" in out.read_text()
    assert affinec([*args, "--in-flight"]) == 1
    assert "--in-flight applies to" in capsys.readouterr().err


# -- the copy bands' indices, written once ------------------------------------------


def _copies_before_tma(spec, config) -> list:
    passes = _passes(config)
    module = build(spec)
    Pipeline(passes[: [p.name for p in passes].index("affinec-tma-copies")]).run(module)
    return [o for o in module.walk() if isinstance(o, nvgpu.DeviceAsyncCopyOp)]


def test_a_copy_bands_indices_are_computed_as_evaluate_computes_them():
    """`index_function` (the proof's indices written once as Python) against
    `evaluate` (the ops walked at each point), at every point of every copy band of a
    strided, padded 3x3 (indices clamped, copies zero-filled at the edges) and of a
    product with partial tiles."""
    import itertools

    from affinec.transforms.gpu.wgmma_tma_copies import (
        _extents,
        _outer_values,
        evaluate,
        index_function,
    )

    conv = ConvSpec(1, 64, 9, 9, 64, 3, 3, stride=2, padding=1, layout="nhwc",
                    filter_layout="rsck", dtype="f16")  # fmt: skip
    cases = [
        (conv, _config(tile_sizes=(1, 4, 8, 64), reduction_tile_sizes=(1, 1, 64))),
        (MatmulSpec(100, 40, 48, "f16"), _config(tile_sizes=(64, 32))),
    ]
    for spec, config in cases:
        copies = _copies_before_tma(spec, config)
        assert len(copies) >= 2
        for copy in copies:
            band = copy.parent_op()
            ivs = list(band.body.block.args)
            roots = [*copy.dstIndices, *copy.srcIndices, copy.srcElements]
            outer = _outer_values(band, roots)
            compute = index_function(roots, [*outer, *ivs], copy, "unfollowed")
            # the outer values (block origin, tap) small: points inside the
            # array, on its edges and past them
            for sample, point in itertools.product(
                [(0, 0), (1, 0), (0, 1), (2, 1)],
                itertools.product(*(range(x) for x in _extents(band))),
            ):
                env = {v: sample[k % 2] for k, v in enumerate(outer)}
                env.update(zip(ivs, point, strict=True))
                want = tuple(evaluate(r, env, copy, "unfollowed") for r in roots)
                assert compute(*env.values()) == want


def test_an_index_the_proof_cannot_follow_is_refused_at_the_copy():
    from affinec.transforms.gpu.wgmma_tma_copies import index_function

    (copy, *_) = _copies_before_tma(MatmulSpec(64, 64, 64, "f16"), _config())
    band = copy.parent_op()
    ivs = list(band.body.block.args)
    compute = index_function(copy.srcIndices, ivs, copy, "not followed")
    with pytest.raises(PassError, match="not followed") as raised:
        compute(*range(len(ivs)))  # the band's outer values are unknown
    assert raised.value.op is copy


def _copy_band_edited(edit) -> tuple:
    """The first copy band of a 100 x 40 x 48 product in 64 x 32 tiles (partial
    tiles: its edges clamp and zero-fill), after `edit(ops, band)` where `ops` maps
    each `affine.apply`'s map, as text, to its op."""
    (copy, *_) = _copies_before_tma(
        MatmulSpec(100, 40, 48, "f16"), _config(tile_sizes=(64, 32))
    )
    band = copy.parent_op()
    ops = {str(o.map.data): o for o in band.walk() if isinstance(o, affine.ApplyOp)}
    edit(ops, band)
    return copy, band


def _remap(op, function) -> None:
    from xdsl.dialects.builtin import AffineMapAttr
    from xdsl.ir.affine import AffineMap

    op.properties["map"] = AffineMapAttr(AffineMap.from_callable(function))


def _refusal(band) -> PassError:
    from affinec.transforms.gpu.wgmma_tma_copies import tile_copy

    with pytest.raises(PassError) as raised:
        tile_copy(band)
    return raised.value


def test_a_copy_band_tma_would_not_copy_is_refused_at_its_copy():
    """Negative controls of `tile_copy`'s proof, each an edit of a band the
    promotion wrote: rows 9 apart (past TMA's element strides), runs of 8 elements
    4 apart (each element copied twice), tile rows that are not the source's, and
    a run copied short inside the matrix (TMA copies it whole). The proof's
    indices are `index_function`'s, so these also show its answers are read."""
    from xdsl.dialects.builtin import IndexType

    from affinec.transforms.gpu.wgmma_tma_copies import tile_copy

    copy, band = _copy_band_edited(lambda ops, band: None)
    assert tile_copy(band).box == (64, 32)  # unedited, it is a box TMA copies

    def nine_apart(ops, band):
        _remap(ops["(d0, d1, d2, d3) -> (((d0 * 64) + d2))"],
               lambda d0, d1, d2, d3: (d0 * 64 + d2 * 9,))  # fmt: skip

    def overlapping(ops, band):
        _remap(ops["(d0, d1, d2, d3) -> (((d1 * 32) + (d3 * 8)))"],
               lambda d0, d1, d2, d3: (d1 * 32 + d3 * 4,))  # fmt: skip
        _remap(ops["(d0, d1) -> ((d1 * 8))"], lambda d0, d1: (d1 * 4,))

    def rows_shuffled(ops, band):
        _remap(ops["(d0, d1) -> (d0)"], lambda d0, d1: ((d0 * 2) % 64,))

    def short_run(ops, band):
        (branch,) = [o for o in band.walk() if isinstance(o, affine.IfOp)]
        four = arith.ConstantOp(IntegerAttr(4, IndexType()))
        band.body.block.insert_op_before(four, branch)
        branch.then_region.block.last_op.operands = [four.result]

    cases = {
        nine_apart: "TMA's element strides are at most 8",
        overlapping: "do not cover the tile once each",
        rows_shuffled: "not the tile's origin plus the element copied",
        short_run: "fills other elements with zeros than those past the matrix's edges",
    }
    for edit, words in cases.items():
        copy, band = _copy_band_edited(edit)
        error = _refusal(band)
        assert words in str(error), (edit.__name__, str(error))
        assert error.op is copy
