"""`affinec-wgmma` with A from registers: convolutions with a filter's taps, pixels in
several band dimensions, strides, proven on the CPU.

Where the block's A is no 2-D tile, each warp loads its rows of A as
`affinec-mma-sync` loads them (`ldmatrix` at each lane's pixel of the promoted input
window) and `affinec.warpgroup_mma_registers` reads the filter tile of each tap by
descriptor. The interpreter runs every stage against float64 and the stage before:
the registers' op at the affine level (B where the planner put it) and, lowered,
`nvvm.wgmma.mma_async.registers` reading B through its real descriptors and A from
the threads' 32-bit registers. Negative controls: a wrong tap offset, A's
fragments in the wrong order, a missing `wgmma.fence`.
"""

from dataclasses import replace

import pytest
from built_once import built_once
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_edits import set_i64_constant
from test_bf16 import _assert_round_trips
from test_wgmma_pipeline import _passes, _refused
from xdsl.utils.exceptions import VerifyException

from affinec.base.spec import ConvSpec
from affinec.driver.checking import Checker
from affinec.driver.config import KernelConfig
from affinec.driver.pipeline import Pipeline
from affinec.frontend.naive import build


def _config(**knobs) -> KernelConfig:
    base = KernelConfig(
        tile_sizes=(1, 8, 8, 32),
        reduction_tile_sizes=(3, 3, 16),
        mma=True,
        tensor_core="wgmma",
        stages=2,
        tma=False,
        reassociate=True,
    )
    return replace(base, **knobs)


def _conv(c, hw, k, r, stride=1, n=1, epilogue="none", layout="rsck") -> ConvSpec:
    return ConvSpec(n, c, hw, hw, k, r, r, stride=stride, padding=r // 2,
                    layout="nhwc", filter_layout=layout, dtype="f16",
                    epilogue=epilogue)  # fmt: skip


@st.composite
def conv_cases(draw):
    """A small NHWC/RSCK convolution the register route takes (3x3 or 1x1, stride
    1 or 2, partial tiles, a reduction step that does not divide the channels)
    and a configuration of it."""
    r = draw(st.sampled_from([3, 3, 1]))
    stride = draw(st.sampled_from([1, 2]))
    tn, th, tw = draw(st.sampled_from([(1, 4, 4), (1, 4, 8), (2, 4, 4), (1, 8, 8)]))
    oh = draw(st.integers(th, th + 2))
    bk = draw(st.sampled_from([16, 32]))
    c = draw(st.sampled_from([16, 32, 48]))
    bn = 8 * draw(st.integers(1, 4))
    k = 8 * draw(st.integers(bn // 8, bn // 8 + 1))
    # the taps whole in each step, or a step per row of taps
    taps = draw(st.sampled_from([(r, r), (1, r)]))
    spec = _conv(c, oh * stride, k, r, stride, n=tn,
                 epilogue=draw(st.sampled_from(["none", "bias-relu"])))  # fmt: skip
    config = _config(
        tile_sizes=(tn, th, tw, bn),
        reduction_tile_sizes=(*taps, bk),
        stages=draw(st.integers(1, 2)),
        stage_output=draw(st.booleans()),
    )
    return spec, config


@settings(max_examples=max(2, settings().max_examples // 5))  # ~20 stages each
@given(conv_cases())
def test_convolutions_with_taps_keep_the_result(case):
    spec, config = case
    module = build(spec)
    Pipeline(_passes(config)).run(module, check=True)
    text = str(module)
    # a 1x1 reads its box of pixels by descriptor (wgmma_lowering_boxes), at
    # stride 2 a box of every other pixel (TMA's element strides)
    registers = spec.r > 1
    assert ("nvvm.wgmma.mma_async.registers" in text) == registers
    assert "nvvm.wgmma.mma_async" in text and "nvvm.mma.sync" not in text


@pytest.mark.parametrize("stride", [1, 2])
def test_a_3x3_convolution_prints_and_reparses_at_every_level(stride):
    """Each pass's output prints and re-parses (custom and generic) and computes
    what float64 does, stride 1 and 2."""
    spec = _conv(32, 8 * stride, 32, 3, stride)
    config = _config(tile_sizes=(1, 8, 8, 32), reduction_tile_sizes=(3, 3, 32))
    checker = Checker(spec)
    module = build(spec)
    seen = []

    def each(p, m, seconds):
        _assert_round_trips(m)
        reorders = getattr(p, "changes_rounding", False)
        result = checker.check(p.name, m, reorders=reorders)
        assert result.ok, result.row()
        seen.append(p.name)

    Pipeline(_passes(config)).run(module, callback=each)
    assert "affinec-wgmma" in seen
    text = str(module)
    assert "nvvm.wgmma.mma_async.registers" in text


def test_conv1_7x7_stride_2_with_its_channels_padded_and_coalesced():
    """ResNet's first layer as `config_for` tiles it for mma.sync (3 channels
    padded to 4, the taps of a row collapsed with them: one k of 28 a row), on an
    image of 8 x 16 outputs: two blocks of 4 x 16, full tiles."""
    from affinec.driver.compiler import compile_to_ptx

    # every block is interpreted at every level: 16 x 16 outputs (four blocks)
    # took about twice as long and proved nothing two do not
    spec = ConvSpec(1, 3, 16, 32, 64, 7, 7, stride=2, padding=3, layout="nhwc",
                    filter_layout="rsck", dtype="f16")  # fmt: skip
    config = replace(
        _config(),
        tile_sizes=(1, 4, 16, 64),
        reduction_tile_sizes=(1, 7, 4),
        pad_channels=4,
        coalesce_reduction=True,
    )
    ptx = compile_to_ptx(spec, config, arch="sm_90a", check=True).ptx
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in ptx


# -- negative controls --------------------------------------------------------------


def _lowered(spec, config):
    """Through every pass (once for each spec and configuration: two negative
    controls edit the same one)."""

    def make():
        module = build(spec)
        Pipeline(_passes(config)).run(module)
        return module

    return built_once(("lowered", spec, config), make)


def test_a_wrong_tap_offset_gives_a_wrong_answer():
    """The descriptor of the second tap's tile moved onto the first's."""
    from affinec.dialects.affinec_wgmma import interleaved_shape

    spec = _conv(16, 8, 16, 3)
    config = _config(tile_sizes=(1, 8, 8, 16), reduction_tile_sizes=(3, 3, 16))
    module = _lowered(spec, config)
    checker = Checker(spec)
    assert checker.check("lowered", module).ok
    # one tap's tile: 16 channels x 16 filters, core matrices 8 x 16 bytes apart
    # at least (the planner may pad them); its offset in 16-byte units
    offsets = []
    for pitch in range(8, 16):
        size = 1
        for x in interleaved_shape(16, 16, pitch):
            size *= x
        offsets.append(size * 2 >> 4)
    assert sum(set_i64_constant(module, o, 0) for o in offsets) >= 1
    assert not checker.check("tap offset", module).ok


def test_fragments_in_the_wrong_order_give_a_wrong_answer():
    from affinec.dialects.affinec_wgmma import WarpgroupMmaRegistersOp

    spec = _conv(16, 8, 16, 3)
    config = _config(tile_sizes=(1, 8, 8, 16), reduction_tile_sizes=(3, 3, 16))
    passes = _passes(config)
    at = [p.name for p in passes].index("affinec-wgmma") + 1
    module = build(spec)
    Pipeline(passes[:at]).run(module)
    checker = Checker(spec)
    assert checker.check("wgmma", module).ok
    op = next(o for o in module.walk() if isinstance(o, WarpgroupMmaRegistersOp))
    a = list(op.a)
    first, second = op.operands.index(a[0]), op.operands.index(a[1])
    operands = list(op.operands)
    operands[first], operands[second] = operands[second], operands[first]
    op.operands = operands
    assert not checker.check("swapped taps", module).ok


def test_a_missing_wgmma_fence_is_refused():
    from affinec.dialects import nvvm

    spec = _conv(16, 8, 16, 3)
    config = _config(tile_sizes=(1, 8, 8, 16), reduction_tile_sizes=(3, 3, 16))
    module = _lowered(spec, config)
    run = next(o for o in module.walk() if isinstance(o, nvvm.WgmmaRegistersRunOp))
    run.verify()
    fence = run.prev_op
    assert isinstance(fence, nvvm.WgmmaFenceAlignedOp)
    fence.detach()
    fence.erase()
    with pytest.raises(VerifyException, match="needs nvvm.wgmma.fence.aligned"):
        run.verify()


# -- PTX ----------------------------------------------------------------------------


@pytest.mark.parametrize("stride", [1, 2])
def test_the_ptx_assembles_for_sm_90a_without_spills(stride):
    from affinec.backend.ptxas import assemble, find_ptxas
    from affinec.driver.compiler import compile_to_ptx

    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    spec = _conv(256, 14 * stride, 256, 3, stride, n=32)
    config = _config(tile_sizes=(1, 14, 14, 128), reduction_tile_sizes=(3, 3, 16))
    ptx = compile_to_ptx(spec, config, arch="sm_90a").ptx
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert "wgmma.fence.sync.aligned" in ptx
    (resources,) = assemble(ptx, "sm_90a").values()
    assert resources.spill_stores == resources.spill_loads == 0
    assert resources.stack_frame == 0
    assert not resources.advisories  # no wgmma serialized


# -- refusals -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "knobs", "message"),
    [
        (_conv(16, 8, 16, 3, layout="kcrs"), {"tile_sizes": (1, 8, 8, 16)},
         "reads the filter as K x N tiles (output channels innermost: RSCK)"),
        (_conv(16, 8, 16, 3), {"tile_sizes": (1, 8, 8, 12)},
         "N = 12 columns: wgmma takes a multiple of 8"),
        (_conv(16, 64, 16, 3), {"tile_sizes": (1, 32, 64, 16)},
         "M = 2048 rows: wgmma needs at most 512"),
        (_conv(320, 8, 16, 3), {"reduction_tile_sizes": (3, 3, 320)},
         "a reduction step of 320 channels: A from registers takes at most 288"),
        (_conv(16, 8, 16, 3), {"tma": True},
         "this step reads A from registers (a convolution's taps): its tiles keep "
         "the promotion's cp.async copies"),
    ],
)  # fmt: skip
def test_bad_inputs_are_refused_located(spec, knobs, message):
    assert message in _refused(spec, _config(**knobs))


# -- runs left in flight --------------------------------------------------------------


def _in_flight_module(monkeypatch, stages: int = 2):
    """A 3x3 convolution whose step's fragments are more than an op may hold (3
    here), so the taps' rows stay a loop around the runs, left in flight: the
    module right after affinec-wgmma{in-flight=true}, and the passes after."""
    import affinec.transforms.gpu.wgmma_registers as registers
    from affinec.passes.affinec_wgmma import AffinecWgmma

    monkeypatch.setattr(registers, "MAX_STEPS", 3)
    spec = _conv(32, 8, 16, 3)
    config = _config(tile_sizes=(1, 8, 8, 16), reduction_tile_sizes=(3, 3, 16),
                     stages=stages)  # fmt: skip
    passes = [
        AffinecWgmma(in_flight=True) if p.name == "affinec-wgmma" else p
        for p in _passes(config)
    ]
    at = [p.name for p in passes].index("affinec-wgmma") + 1
    module = build(spec)
    Pipeline(passes[:at]).run(module)
    return spec, module, passes[at:]


def test_runs_left_in_flight_keep_the_result(monkeypatch):
    from affinec.dialects.affinec_wgmma import WarpgroupMmaRegistersOp

    spec, module, rest = _in_flight_module(monkeypatch)
    steps = [o for o in module.walk() if isinstance(o, WarpgroupMmaRegistersOp)]
    assert [(s.groups_left, len(s.a)) for s in steps] == [(1, 3)]
    checker = Checker(spec)
    assert checker.check("wgmma", module).ok
    Pipeline(rest).run(module)
    result = checker.check("lowered", module)
    assert result.ok, result.row()
    text = str(module)
    assert "nvvm.wgmma.wait.group.sync.aligned 1" in text
    assert "nvvm.wgmma.wait.group.sync.aligned 0" in text


def test_a_missing_wait_after_runs_in_flight_is_a_race(monkeypatch):
    """Without the wait after the taps' loop, the last run still reads the filter
    tile when the next step's copies land in it (one stage: the copies land before
    the next run): the interpreter says so."""
    from affinec.dialects import nvvm

    spec, module, _ = _in_flight_module(monkeypatch, stages=1)
    checker = Checker(spec)
    assert checker.check("wgmma", module).ok
    (wait,) = [o for o in module.walk() if isinstance(o, nvvm.WgmmaWaitGroupSyncOp)]
    wait.detach()
    wait.erase()
    result = checker.check("no wait", module)
    assert not result.ok and "wgmma" in result.message, result.row()


# -- the configuration helper and the GPU script --------------------------------------


def test_wgmma_taps_config_takes_resnets_3x3_layers():
    from affinec.driver.wgmma_taps_config import TAPS_TILES, taps_configs
    from affinec.frontend.networks import network

    layers = [la.spec for la in network("resnet50", 32) if la.spec.r == 3]
    assert len(layers) == 7
    for spec in layers:
        configs = taps_configs(spec)
        assert len(configs) == len(TAPS_TILES)
        for config, (rows, columns, channels) in zip(configs, TAPS_TILES, strict=True):
            images, height, width, n = config.tile_sizes
            assert rows // 2 < images * height * width <= rows
            assert n == min(columns, spec.k)
            assert config.reduction_tile_sizes == (3, 3, channels)
            assert config.tensor_core == "wgmma" and not config.tma
            assert config.stages >= 1
            assert config.split_phases == (spec.stride != (1, 1))


def test_the_pixel_tile_idles_the_fewest_warpgroup_rows():
    from affinec.driver.wgmma_taps_config import pixel_tile

    # 7x7: five images fill four warpgroups (245 of 256 rows)
    assert pixel_tile(_conv(512, 7, 512, 3, n=32), 256) == (5, 7, 7)
    # 56x56: 8 x 16 pixels, 128 rows, no tile cut short along the rows
    assert pixel_tile(_conv(64, 56, 64, 3, n=32), 128) == (1, 16, 8)


@pytest.mark.parametrize(
    ("spec", "arch", "message"),
    [
        (_conv(64, 14, 64, 1), "sm_90a", "for convolutions with taps"),
        (_conv(64, 14, 64, 3, layout="kcrs"), "sm_90a", "RSCK filters"),
        (_conv(64, 14, 64, 3), "sm_80", "wgmma needs a chip that has it"),
        (replace(_conv(64, 14, 64, 3), dtype="f32"), "sm_90a", "the SIMT route"),
    ],
)
def test_wgmma_taps_config_refuses_saying_why(spec, arch, message):
    from affinec.driver.wgmma_taps_config import wgmma_taps_config

    with pytest.raises(ValueError, match=message):
        wgmma_taps_config(spec, arch=arch)


def test_the_gpu_script_measures_every_route_of_each_3x3_layer():
    from repository_scripts import load_script

    script = load_script("scripts/gpu_wgmma_taps.py")
    layers = script.layers(32)
    assert len(layers) == 16  # ResNet-50's 7 and VGG-16's 9 shapes
    name, spec = layers[0]
    routes = script.routes(spec)
    kinds = [(route, note) for route, _, note in routes]
    assert kinds.count(("wgmma taps", "")) == 3
    assert ("wgmma taps", "in-flight") in kinds
    assert {"mma.sync", "template wgmma"} <= {route for route, _ in kinds}
    assert all(c is not None for _, c, _ in routes)
