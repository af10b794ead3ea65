"""`affinec-wgmma` reading a 3x3 convolution's tiles by descriptor, one tap and 64
channels a step, proven on the CPU.

With the reduction tiled `(1, 1, 64)` the promotion copies, for each (tap, channel
step), the input over the block's pixel box at the tap's shifted origin and the
tap's 64 x N filter tile; `affinec-wgmma` reads the input tile as one 2-D tile of
the block's pixels x 64 channels (`wgmma_lowering_boxes`), not from registers. The
interpreter runs every stage against float64: the `affinec.warpgroup_mma` steps on
the merged tiles, the planner's interleaved layout, the lowered `wgmma.mma_async`
reading both tiles through real descriptors. `affinec-tma-copies`' proof reads
each input copy band as a 4-D box of the NHWC input at the tap's shifted origin
(TMA's zero fill past the image's edges: the padding). Negative controls: pixels
merged in the wrong order, a copy shifted off its tap.
"""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_bf16 import _assert_round_trips
from test_wgmma_pipeline import _passes, _refused

from affinec.base.spec import ConvSpec
from affinec.driver.checking import Checker
from affinec.driver.config import KernelConfig
from affinec.driver.pipeline import Pipeline
from affinec.driver.wgmma_taps_ss_config import wgmma_taps_ss_config
from affinec.frontend.naive import build


def _conv(c, hw, k, n=1, r=3, stride=1, epilogue="none", dilation=1, **kw) -> ConvSpec:
    return ConvSpec(n, c, hw, hw, k, r, r, stride=stride,
                    padding=dilation * (r // 2), dilation=dilation,
                    layout=kw.get("layout", "nhwc"),
                    filter_layout=kw.get("filter_layout", "rsck"),
                    dtype="f16", epilogue=epilogue)  # fmt: skip


def _config(**knobs) -> KernelConfig:
    base = KernelConfig(
        tile_sizes=(1, 8, 8, 64),
        reduction_tile_sizes=(1, 1, 64),
        mma=True,
        tensor_core="wgmma",
        stages=2,
        tma=False,
        reassociate=True,
    )
    return replace(base, **knobs)


def _through(spec, config, name: str = "affinec-wgmma"):
    """The module right after pass `name`, and the passes after it."""
    passes = _passes(config)
    at = [p.name for p in passes].index(name) + 1
    module = build(spec)
    Pipeline(passes[:at]).run(module)
    return module, passes[at:]


@st.composite
def ss_cases(draw):
    """A small 3x3 the route takes (partial pixel boxes at the image's edges, one
    or two images, one or two channel steps, two blocks of output channels,
    dilated or not), and a configuration of it: its tiles by cp.async or TMA."""
    # whole warpgroups of pixels, or the last one's rows past the box idle
    box = draw(st.sampled_from([(8, 8), (4, 16), (16, 8), (5, 7)]))
    hw = draw(st.integers(8, 10))
    c = draw(st.sampled_from([64, 64, 128]))
    bn = draw(st.sampled_from([32, 64]))
    k = draw(st.sampled_from([bn, 2 * bn]))
    spec = _conv(c, hw, k, n=draw(st.integers(1, 2)),
                 epilogue=draw(st.sampled_from(["none", "bias-relu"])),
                 dilation=draw(st.sampled_from([1, 1, 2])))  # fmt: skip
    stages = draw(st.integers(1, 3))
    tma = draw(st.booleans())
    config = _config(
        tile_sizes=(1, *box, bn),
        stages=stages,
        stage_output=draw(st.booleans()),
        tma=tma,
        in_flight=tma and stages == 3,
    )
    return spec, config


@settings(max_examples=max(2, settings().max_examples // 4))  # ~20 stages each
@given(ss_cases())
def test_3x3s_one_tap_a_step_keep_the_result(case):
    spec, config = case
    module = build(spec)
    Pipeline(_passes(config)).run(module, check=True)
    text = str(module)
    assert "nvvm.wgmma.mma_async" in text
    assert "registers" not in text and "nvvm.mma.sync" not in text


@pytest.mark.parametrize("tma", [False, True])
def test_a_3x3_prints_and_reparses_at_every_level(tma):
    """Each pass's output prints and re-parses (custom and generic) and computes
    what float64 does; the step reads the input tile as [pixels, 64] by
    descriptor; by TMA, the input's tiles come as 4-D boxes at each tap's shifted
    origin, the filter's as 4-D boxes of a tap."""
    from affinec.dialects import nvgpu
    from affinec.dialects.affinec_wgmma import WarpgroupMmaStepOp

    spec = _conv(64, 8, 64)
    config = _config(tma=tma, in_flight=tma, stages=3)
    checker = Checker(spec)
    module = build(spec)
    seen = []

    def each(p, m, seconds):
        _assert_round_trips(m)
        result = checker.check(
            p.name, m, reorders=getattr(p, "changes_rounding", False)
        )
        assert result.ok, result.row()
        seen.append(p.name)
        if p.name == "affinec-wgmma":
            (step,) = [o for o in m.walk() if isinstance(o, WarpgroupMmaStepOp)]
            assert step.a.type.get_shape() == (3, 64, 64)  # stage, pixels, channels
            assert step.b.type.get_shape() == (3, 64, 64)  # stage, channels, columns
        if p.name == "affinec-tma-copies":
            loads = [o for o in m.walk() if isinstance(o, nvgpu.TmaAsyncLoadOp)]
            boxes = {o.dst.type.get_shape() for o in loads}
            assert boxes == {(1, 8, 8, 64), (1, 1, 64, 64)}
            assert all(len(o.coordinates) == 4 for o in loads)

    Pipeline(_passes(config)).run(module, callback=each)
    assert "affinec-wgmma" in seen
    assert ("affinec-tma-copies" in seen) == tma
    assert "nvvm.wgmma.mma_async" in str(module)


# -- negative controls --------------------------------------------------------------


def _merged_copies(module):
    """The affine.apply ops that give each copy into the input tile its row."""
    from affinec.dialects import nvgpu

    out = []
    for op in module.walk():
        if isinstance(op, nvgpu.DeviceAsyncCopyOp) and "input" in (
            op.dst.name_hint or ""
        ):
            out.append(op.dstIndices[-2].owner)
    return out


def test_pixels_merged_in_the_wrong_order_give_a_wrong_answer():
    """The input tile's rows column-major instead of the band's row-major order."""
    from xdsl.ir.affine import AffineExpr, AffineMap

    spec = _conv(64, 8, 64)
    module, _ = _through(spec, _config())
    checker = Checker(spec)
    assert checker.check("wgmma", module).ok
    applies = _merged_copies(module)
    assert applies
    d = AffineExpr.dimension
    for apply in applies:
        (e,) = apply.map.data.results
        assert e == (d(0) * 8 + d(1)) * 8 + d(2)
        apply.map = type(apply.map)(AffineMap(3, 0, ((d(0) * 8 + d(2)) * 8 + d(1),)))
    assert not checker.check("transposed pixels", module).ok


def test_a_copy_off_its_tap_is_no_tma_box():
    """`tile_copy` proves each input copy band a 4-D box at the tap's shifted
    origin (the padding TMA's zero fill), each filter copy band a 1x1x64x64 box; a
    band whose source moves one column off for half the box is refused."""
    from xdsl.ir.affine import AffineExpr, AffineMap

    from affinec.base.diagnostics import PassError
    from affinec.dialects import affine
    from affinec.dialects.affinec_wgmma import WarpgroupMmaStepOp
    from affinec.transforms.gpu.wgmma_tma_copies import copy_bands, tile_copy

    spec = _conv(64, 8, 64)
    module, _ = _through(spec, _config())
    step = next(o for o in module.walk() if isinstance(o, WarpgroupMmaStepOp))
    grid = next(o for o in module.walk() if o.attributes.get("affinec.mapping"))
    copies = [tile_copy(b) for b in copy_bands(grid, {step.a, step.b})]
    assert sorted({c.box for c in copies}) == [(1, 1, 64, 64), (1, 8, 8, 64)]
    copy = next(c for c in copies if c.box == (1, 8, 8, 64))
    column = copy.copy.srcIndices[2]  # clamped: min(max(apply))
    while not isinstance(column.owner, affine.ApplyOp):
        column = column.owner.operands[0]
    apply = column.owner
    m = apply.map.data
    (e,) = m.results
    ow = list(apply.mapOperands).index(copy.band.body.block.args[2])
    bent = e + AffineExpr.dimension(ow) // 4
    apply.map = type(apply.map)(AffineMap(m.num_dims, m.num_symbols, (bent,)))
    with pytest.raises(PassError, match="TMA copies a box"):
        tile_copy(copy.band)


# -- PTX ----------------------------------------------------------------------------


def test_the_ptx_assembles_for_sm_90a_without_spills():
    """ResNet-50's 3x3 of 256 channels at 14x14, batch 32, as the configuration
    gives it: `wgmma` of m64n128k16 reading both tiles by descriptor, loaded by
    4-D TMA boxes."""
    from affinec.backend.ptxas import assemble, find_ptxas
    from affinec.driver.compiler import compile_to_ptx

    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    spec = _conv(256, 14, 256, n=32)
    config = wgmma_taps_ss_config(spec)
    assert config.reduction_tile_sizes == (1, 1, 64) and config.tma
    ptx = compile_to_ptx(spec, config, arch="sm_90a").ptx
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert "cp.async.bulk.tensor.4d" in ptx and "registers" not in ptx
    (resources,) = assemble(ptx, "sm_90a").values()
    assert resources.spill_stores == resources.spill_loads == 0
    assert resources.stack_frame == 0
    assert not resources.advisories


# -- the configuration and refusals ---------------------------------------------------


def test_the_configuration_tiles_one_tap_and_64_channels_a_step():
    spec = _conv(128, 28, 128, n=32)
    config = wgmma_taps_ss_config(spec, 128, 128)
    images, h, w, n = config.tile_sizes
    assert 64 < images * h * w <= 128 and n == 128
    assert config.reduction_tile_sizes == (1, 1, 64)
    assert config.tensor_core == "wgmma" and config.tma and config.in_flight
    assert 3 <= config.stages <= 4
    boxed = wgmma_taps_ss_config(spec, 128, 128, box=(1, 4, 28), tma=False)
    assert boxed.tile_sizes == (1, 4, 28, 128) and not boxed.tma


@pytest.mark.parametrize(
    ("spec", "arch", "message"),
    [
        (_conv(64, 8, 64), "sm_90", "wgmma needs a chip that has it"),
        (_conv(64, 8, 64, r=1), "sm_90a", "for convolutions with taps"),
        (_conv(64, 8, 64, filter_layout="kcrs"), "sm_90a", "RSCK filter"),
        (_conv(64, 16, 64, stride=2), "sm_90a", "the tile of a tap is a box of the input at stride 1 only"),
        (_conv(96, 8, 64), "sm_90a", "96 channels: a step reads 64"),
        (_conv(64, 8, 64, n=2), "sm_90a", "within one image, or whole images"),
    ],
)  # fmt: skip
def test_the_configuration_refuses_what_it_cannot_tile(spec, arch, message):
    box = (2, 4, 8) if spec.n == 2 else None
    with pytest.raises(ValueError, match=message):
        wgmma_taps_ss_config(spec, box=box, arch=arch)


def test_a_box_of_pixels_no_multiple_of_64_idles_the_last_rows():
    """A box of 2 images of 5 x 5 pixels: 50 rows of a 64-row tile, the rows past
    them never copied into (TMA's box brings 50 rows) and never stored."""
    from affinec.dialects import nvgpu
    from affinec.dialects.affinec_wgmma import WarpgroupMmaStepOp

    spec = _conv(64, 5, 64, n=2)
    config = _config(tile_sizes=(2, 5, 5, 64), tma=True)
    module, rest = _through(spec, config, "affinec-tma-copies")
    (step,) = [o for o in module.walk() if isinstance(o, WarpgroupMmaStepOp)]
    assert step.a_tile()[0] == 64
    boxes = {
        o.dst.type.get_shape()
        for o in module.walk()
        if isinstance(o, nvgpu.TmaAsyncLoadOp)
    }
    assert (2, 5, 5, 64) in boxes
    checker = Checker(spec)
    assert checker.check("tma", module).ok
    Pipeline(rest).run(module)
    assert checker.check("lowered", module).ok


def test_tma_coordinates_in_the_wrong_order_give_a_wrong_answer():
    """The input box's row and column coordinates swapped (a box moved off the
    tap's origin wherever the block's rows and columns differ)."""
    from affinec.dialects import nvgpu

    spec = _conv(64, 8, 64)
    module, _ = _through(spec, _config(tile_sizes=(1, 4, 8, 64), tma=True),
                         "affinec-tma-copies")  # fmt: skip
    checker = Checker(spec)
    assert checker.check("tma", module).ok
    swapped = 0
    for op in module.walk():
        if isinstance(op, nvgpu.TmaAsyncLoadOp) and op.dst.type.get_shape()[1] == 4:
            _swap_coordinates(op)
            swapped += 1
    assert swapped
    assert not checker.check("swapped coordinates", module).ok


def _swap_coordinates(op) -> None:
    """Swap the second and third coordinates of a TMA load (a box's column and
    row)."""
    first = 3 + 1  # dst, barriers, tensor map, then the coordinates
    second = first + 1
    assert op.operands[first] is op.coordinates[1]
    assert op.operands[second] is op.coordinates[2]
    operands = list(op.operands)
    operands[first], operands[second] = operands[second], operands[first]
    op.operands = operands


def test_a_step_of_channels_no_multiple_of_16_is_refused_located():
    message = _refused(_conv(64, 8, 64), _config(reduction_tile_sizes=(1, 1, 24)))
    assert "wgmma reads A by descriptor" not in message
    assert "the reduction step is K = 24" in message


def test_the_gpu_script_measures_every_route_of_each_stride_1_3x3():
    from repository_scripts import load_script

    script = load_script("scripts/gpu_wgmma_taps_ss.py")
    layers = script.layers(32)
    # ResNet-50's 4 and VGG-16's 8 stride-1 3x3s of 64 channels or more
    assert len(layers) == 12
    assert all(spec.stride == (1, 1) and spec.c >= 64 for _, spec in layers)
    assert [spec.c >= 128 for _, spec in layers] == [True] * 9 + [False] * 3
    routes = script.routes(layers[0][1])
    kinds = [route for route, _, _ in routes]
    assert kinds.count("wgmma ss cp.async") == 1 and kinds.count("wgmma ss") >= 2
    assert {"wgmma taps", "template wgmma"} <= set(kinds)
    assert all(c is not None for _, c, _ in routes)
    ss = [c for route, c, _ in routes if route == "wgmma ss"]
    assert all(c.tma and c.reduction_tile_sizes == (1, 1, 64) for c in ss)


def test_a_box_landing_off_its_swizzle_alignment_is_refused_located():
    """The view a 4-D box lands in moved 8 elements (16 bytes) on: its dynamic
    offset no multiple of the 1024 bytes a 128-byte swizzle needs, refused where
    the TMA load is lowered."""
    from xdsl.dialects import memref
    from xdsl.ir.affine import AffineMap

    from affinec.base.diagnostics import PassError

    spec = _conv(64, 8, 64)
    module, rest = _through(spec, _config(tma=True), "affinec-tma-copies")
    casts = [o for o in module.walk() if isinstance(o, memref.ReinterpretCastOp)]
    assert casts
    apply = casts[0].offsets[0].owner
    m = apply.map.data
    (e,) = m.results
    apply.map = type(apply.map)(AffineMap(m.num_dims, m.num_symbols, (e + 8,)))
    with pytest.raises(PassError, match="multiples of 16 bytes, not of 1024"):
        Pipeline(rest).run(module)


def test_one_stage_by_tma_numbers_its_steps_over_every_tap_and_channel_step():
    """With one stage each step's phase is the parity of its number over the taps'
    and the channels' loops (3 x 3 x 2 steps), not the innermost loop's trip:
    the phases are proven and the result kept."""
    spec = _conv(128, 8, 32)
    module = build(spec)
    config = _config(tile_sizes=(1, 8, 8, 32), stages=1, tma=True)
    Pipeline(_passes(config)).run(module, check=True)
    assert "nvvm.wgmma.mma_async" in str(module)
