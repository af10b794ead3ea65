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
(TMA's zero fill past the image's edges: the padding). A strided convolution's
(a 3x3/2, a 1x1/2) tap reads every other input row and column: its copy band is a
box with element strides 2, TMA's `elementStrides`. Negative controls: pixels
merged in the wrong order, a copy shifted off its tap, a strided box read without
its element strides.
"""

from dataclasses import replace

import numpy as np
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


@st.composite
def strided_cases(draw):
    """A small convolution of stride 2 the route takes: a 3x3/2 or a 1x1/2 (one
    tap), the image even or odd (the last output row's taps at the bottom edge),
    partial pixel boxes, one or two images, and a configuration of it, its tiles
    by TMA boxes with element strides or by cp.async."""
    box = draw(st.sampled_from([(8, 8), (4, 8), (3, 5)]))
    r = draw(st.sampled_from([3, 3, 1]))
    bn = draw(st.sampled_from([32, 64]))
    spec = _conv(draw(st.sampled_from([64, 128])), draw(st.integers(12, 17)),
                 draw(st.sampled_from([bn, 2 * bn])), n=draw(st.integers(1, 2)),
                 r=r, stride=2,
                 epilogue=draw(st.sampled_from(["none", "bias-relu"])))  # fmt: skip
    stages = draw(st.integers(1, 3))
    tma = draw(st.sampled_from([True, True, False]))
    config = _config(
        tile_sizes=(1, *box, bn),
        stages=stages,
        stage_output=draw(st.booleans()),
        tma=tma,
        in_flight=tma and stages == 3,
    )
    return spec, config


@settings(max_examples=max(2, settings().max_examples // 4))
@given(strided_cases())
def test_strided_convolutions_one_tap_a_step_keep_the_result(case):
    spec, config = case
    module = build(spec)
    Pipeline(_passes(config)).run(module, check=True)
    text = str(module)
    assert "nvvm.wgmma.mma_async" in text
    assert ("traversal = [1, 2, 2, 1]" in text) == config.tma


@pytest.mark.parametrize(("tma", "stride"), [(False, 1), (True, 1), (True, 2)])
def test_a_3x3_prints_and_reparses_at_every_level(tma, stride):
    """Each pass's output prints and re-parses (custom and generic) and computes
    what float64 does; the step reads the input tile as [pixels, 64] by
    descriptor; by TMA, the input's tiles come as 4-D boxes at each tap's shifted
    origin (at stride 2, with element strides 2 along the rows and columns), the
    filter's as 4-D boxes of a tap."""
    from affinec.dialects import nvgpu
    from affinec.dialects.affinec_wgmma import WarpgroupMmaStepOp

    spec = _conv(64, 8 * stride, 64, stride=stride)
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
            strides = {
                o.dst.type.get_shape(): o.tensorMapDescriptor.type.element_strides
                for o in loads
            }
            assert strides[1, 8, 8, 64] == (1, stride, stride, 1)
            assert strides[1, 1, 64, 64] == (1, 1, 1, 1)

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


def test_a_strided_box_read_without_its_element_strides_gives_a_wrong_answer():
    """`tile_copy` reads a 3x3/2's input copy band as a box of 8 x 8 pixels at
    element strides 2; the tensor map of that box made with strides 1 (the box's
    pixels the first 8 x 8 of the window) computes something else."""
    from affinec.dialects import nvgpu
    from affinec.dialects.affinec_wgmma import WarpgroupMmaStepOp
    from affinec.transforms.gpu.wgmma_tma_copies import copy_bands, tile_copy

    spec = _conv(64, 16, 64, stride=2)
    module, _ = _through(spec, _config())
    step = next(o for o in module.walk() if isinstance(o, WarpgroupMmaStepOp))
    grid = next(o for o in module.walk() if o.attributes.get("affinec.mapping"))
    copies = [tile_copy(b) for b in copy_bands(grid, {step.a, step.b})]
    assert {(c.box, c.strides) for c in copies} == {
        ((1, 8, 8, 64), (1, 2, 2, 1)),
        ((1, 1, 64, 64), ()),
    }
    module, _ = _through(spec, _config(tma=True), "affinec-tma-copies")
    checker = Checker(spec)
    assert checker.check("tma", module).ok
    strided = [
        o
        for o in module.walk()
        if isinstance(o, nvgpu.TmaCreateDescriptorOp)
        and o.tensorMap.type.element_strides != (1, 1, 1, 1)
    ]
    assert len(strided) == 1
    (old,) = strided
    t = old.tensorMap.type
    unit = nvgpu.TensorMapDescriptorType(t.tensor, swizzle=t.swizzle.data)
    new = nvgpu.TmaCreateDescriptorOp(old.tensor, list(old.boxDimensions), unit)
    old.parent_block().insert_op_before(new, old)
    old.tensorMap.replace_all_uses_with(new.tensorMap)
    old.parent_block().erase_op(old)
    assert not checker.check("no element strides", module).ok


def test_tma_reads_every_strided_element_and_zero_fills_each_past_the_edges():
    """The interpreter's TMA box at element strides 2: from -1 (the padding's
    row) and from 3 of 7 rows (the last two past the bottom), as a zero-padded
    array sliced with step 2."""
    from affinec.interpreter.mbarriers import TensorMap

    a = np.arange(2 * 7 * 7 * 8, dtype=np.float16).reshape(2, 7, 7, 8)
    padded = np.zeros((2, 12, 12, 8), np.float16)
    padded[:, 1:8, 1:8] = a
    tensor_map = TensorMap(a, (1, 4, 4, 8), 0, 0, (1, 2, 2, 1))
    for h, w in [(-1, -1), (3, 0), (-1, 4)]:
        got = tensor_map.read_box((0, w, h, 1))  # innermost first
        expected = padded[1:2, h + 1 : h + 9 : 2, w + 1 : w + 9 : 2]
        assert np.array_equal(got, expected), (h, w)


def test_a_tensor_map_with_element_strides_spans_stride_times_its_box():
    """The driver's box dimensions are the landing box times the element
    strides (at most 256), the innermost traversed by 1, strides up to 8: what
    the host encodes and the descriptor type verifies."""
    from xdsl.dialects.builtin import MemRefType, f16
    from xdsl.utils.exceptions import VerifyException

    from affinec.dialects import gpu, nvgpu
    from affinec.hardware.tensor_maps import TensorMapError, TiledTensorMap

    shape, strides = (2, 16, 300, 64), (16 * 300 * 128, 300 * 128, 128, 2)
    m = TiledTensorMap.of(np.float16, shape, strides, (1, 4, 8, 64), 128,
                          element_strides=(1, 2, 2, 1))  # fmt: skip
    assert m.box_dims == (1, 8, 16, 64)
    plain = TiledTensorMap.of(np.float16, shape, strides, (1, 4, 8, 64), 128,
                              element_strides=(1, 1, 1, 1))  # fmt: skip
    assert plain.element_strides == () and plain.box_dims == (1, 4, 8, 64)
    for box, steps, message in [
        ((1, 4, 129, 64), (1, 2, 2, 1), "box sizes from 1 to 256"),
        ((1, 4, 8, 64), (1, 2, 2, 2), "innermost dimension's element stride"),
        ((1, 4, 8, 64), (1, 9, 1, 1), "element strides from 1 to 8"),
    ]:
        with pytest.raises(TensorMapError, match=message):
            TiledTensorMap.of(np.float16, shape, strides, box, 128,
                              element_strides=steps)  # fmt: skip
    tile = gpu.in_memory_space(
        MemRefType(f16, [1, 4, 8, 64]), gpu.WORKGROUP_ADDRESS_SPACE
    )
    assert nvgpu.TensorMapDescriptorType(tile).element_strides == (1, 1, 1, 1)
    with pytest.raises(VerifyException, match="traversed with a stride of 1"):
        nvgpu.TensorMapDescriptorType(tile, traversal=(1, 2, 2, 2)).verify()


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


@pytest.mark.parametrize(("c", "hw", "k", "r"), [(128, 56, 128, 3), (512, 28, 1024, 1)])
def test_resnet50s_strided_layers_assemble_for_sm_90a_without_spills(c, hw, k, r):
    """ResNet-50's 3x3/2 of 128 channels at 56x56 and its 1x1/2 downsample of 512
    channels at 28x28, batch 32, as the configuration gives them: the input's
    boxes by 4-D TMA loads with element strides 2."""
    from affinec.backend.ptxas import assemble, find_ptxas
    from affinec.driver.compiler import compile_to_ptx

    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    spec = _conv(c, hw, k, n=32, r=r, stride=2)
    config = wgmma_taps_ss_config(spec)
    assert config.reduction_tile_sizes == (1, 1, 64) and config.tma
    compiled = compile_to_ptx(spec, config, arch="sm_90a")
    ptx = compiled.ptx
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert "cp.async.bulk.tensor.4d" in ptx and "registers" not in ptx
    (resources,) = assemble(ptx, "sm_90a").values()
    assert resources.spill_stores == resources.spill_loads == 0
    assert resources.stack_frame == 0
    assert not resources.advisories
    kernel = compiled.runtime_kernel()
    maps = [m for launch in kernel.launches for m in launch.tensor_maps if m]
    assert {m.element_strides for m in maps} == {(1, 2, 2, 1), ()}


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


def test_the_configuration_takes_resnet50s_strided_layers():
    """ResNet-50's three 3x3/2s and three 1x1/2 downsamples at batch 32: every
    tile of `ss_configs` one tap and 64 channels a step."""
    from affinec.driver.wgmma_taps_ss_config import ss_configs
    from affinec.frontend.networks import network

    strided = [
        layer.spec
        for layer in network("resnet50", 32)
        if layer.spec.stride == (2, 2) and layer.spec.c >= 64
    ]
    assert sorted((s.r, s.c, s.h) for s in strided) == [
        (1, 256, 56), (1, 512, 28), (1, 1024, 14),
        (3, 128, 56), (3, 256, 28), (3, 512, 14),
    ]  # fmt: skip
    for spec in strided:
        configs = ss_configs(spec)
        assert len(configs) >= 3, spec.to_text()
        assert all(c.reduction_tile_sizes == (1, 1, 64) for c in configs)
    span = _conv(64, 260, 64, stride=2)
    with pytest.raises(ValueError, match="spanning at most 256 input pixels"):
        wgmma_taps_ss_config(span, 256, 64, box=(1, 1, 129))


@pytest.mark.parametrize(
    ("spec", "arch", "message"),
    [
        (_conv(64, 8, 64), "sm_90", "wgmma needs a chip that has it"),
        (_conv(64, 8, 64, r=1), "sm_90a", "for convolutions with taps"),
        (_conv(64, 8, 64, filter_layout="kcrs"), "sm_90a", "RSCK filter"),
        (_conv(64, 40, 64, stride=9), "sm_90a", "element strides of at most 8"),
        (_conv(96, 8, 64), "sm_90a", "96 channels: a step reads 64"),
        (_conv(64, 8, 64, n=2), "sm_90a", "within one image, or whole images"),
        (_conv(64, 10, 64, n=3), "sm_90a", "one output row"),
    ],
)  # fmt: skip
def test_the_configuration_refuses_what_it_cannot_tile(spec, arch, message):
    box = {2: (2, 4, 8), 3: (1, 1, 10)}.get(spec.n)
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


def test_the_gpu_script_measures_every_route_of_each_3x3_and_strided_1x1():
    from repository_scripts import load_script

    script = load_script("scripts/gpu_wgmma_taps_ss.py")
    layers = script.layers(32)
    # ResNet-50's 4 and VGG-16's 8 stride-1 3x3s of 64 channels or more, and
    # ResNet-50's 3 3x3/2s and 3 1x1/2s, the template's (128 channels or more)
    # first
    assert len(layers) == 18
    strided = [spec for _, spec in layers if spec.stride != (1, 1)]
    assert (
        sorted((s.r, s.stride) for s in strided)
        == [(1, (2, 2))] * 3 + [(3, (2, 2))] * 3
    )
    assert all(spec.c >= 64 for _, spec in layers)
    assert [spec.c >= 128 for _, spec in layers] == [True] * 15 + [False] * 3
    for spec in (layers[0][1], strided[0]):
        routes = script.routes(spec)
        kinds = [route for route, _, _ in routes]
        assert kinds.count("wgmma ss cp.async") == 1
        assert kinds.count("wgmma ss") >= 2
        assert {"wgmma taps", "template wgmma"} <= set(kinds)
        assert dict((r, c) for r, c, _ in routes)["template wgmma"] is not None
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
