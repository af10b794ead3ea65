"""`affinec-wgmma-gemm`: a spec's naive matrix product as a Hopper kernel (TMA,
mbarrier stages, wgmma), checked by the interpreter against the naive IR at every
level of its lowering; compiled for sm_90a; launched with its tensor maps."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlir_opt import mlir_opt, needs_mlir_opt, printed, same_ir

from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import KernelConfig, config_for, wgmma_config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import wgmma_passes
from affinec.frontend.naive import build
from affinec.transforms.gpu.wgmma_plan import SCHEDULES, GemmKernel, pixel_box
from affinec.transforms.gpu.wgmma_text import gemm_module_text
from strategies import examples

TARGET = "nvvm-attach-target{chip=sm_90a}"


def _checked(spec: MatmulSpec, config: KernelConfig) -> None:
    module = build(spec)
    Pipeline([*Pipeline.parse(TARGET).passes, *wgmma_passes(config)]).run(
        module, check=True
    )


@settings(max_examples=examples(6), deadline=None)
@given(
    m=st.integers(1, 140),
    n=st.integers(1, 20).map(lambda x: 8 * x),
    k=st.integers(1, 26).map(lambda x: 8 * x),
    dtype=st.sampled_from(["f16", "bf16"]),
    epilogue=st.sampled_from(["none", "bias-relu", "scale,bias,residual,relu6"]),
    tile=st.sampled_from([(64, 16), (64, 64), (128, 32), (64, 128)]),
    schedule=st.sampled_from(SCHEDULES),
    stages=st.integers(2, 4),
)
def test_the_kernel_computes_the_naive_product_at_every_level(
    m, n, k, dtype, epilogue, tile, schedule, stages
):
    # edges: m, n and k need not be multiples of the tiles (TMA fills with zeros)
    spec = MatmulSpec(m, n, k, dtype, epilogue)
    if schedule == "cooperative":  # two consumers of 64 rows each
        tile = (128, tile[1])
    config = KernelConfig(
        wgmma=True, wgmma_tile=tile, stages=stages, wgmma_schedule=schedule
    )
    _checked(spec, config)


@st.composite
def routed_convolutions(draw) -> ConvSpec:
    """Convolutions the route takes: strided ones on images the stride divides,
    with a column stride on a multiple of 64 channels."""
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    least_h = dilation[0] * (r - 1) + 1 - 2 * padding[0]
    least_w = dilation[1] * (s - 1) + 1 - 2 * padding[1]
    sh, sw = stride
    h = sh * draw(st.integers(max(1, -(-least_h // sh)), 12 // sh))
    w = sw * draw(st.integers(max(1, -(-least_w // sw)), 12 // sw))
    return ConvSpec(
        n=draw(st.integers(1, 2)),
        c=draw(st.sampled_from([64, 128] if sw > 1 else [8, 16, 72])),
        h=h, w=w,
        k=draw(st.sampled_from([8, 24, 40])),
        r=r, s=s, stride=stride, padding=padding, dilation=dilation,
        layout="nhwc", filter_layout="rsck",
        dtype=draw(st.sampled_from(["f16", "bf16"])),
        epilogue=draw(st.sampled_from(["none", "bias-relu", "bias,residual,relu"])),
    )  # fmt: skip


@settings(max_examples=examples(5), deadline=None)
@given(
    spec=routed_convolutions(),
    tile=st.sampled_from([(64, 16), (64, 64), (128, 32)]),
    schedule=st.sampled_from(SCHEDULES),
    stages=st.integers(2, 3),
)
def test_a_convolution_tap_by_tap_computes_the_naive_one_at_every_level(
    spec, tile, schedule, stages
):
    if schedule == "cooperative":  # two consumers, each its part of the pixels
        tile = (128, tile[1])
    # the block's pixels are a box of the image, each tap's rows one 4-D TMA box
    # at the tap's offset (the padding TMA's zero fill), strided: one 5-D box of a
    # phase of the stride; the filter's channels past c are zeros too
    module = build(spec)
    config = KernelConfig(
        wgmma=True, wgmma_tile=tile, stages=stages, wgmma_schedule=schedule
    )
    Pipeline([*Pipeline.parse(TARGET).passes, *wgmma_passes(config)]).run(
        module, check=True
    )


def test_the_block_s_pixels_are_the_box_with_the_least_waste():
    assert pixel_box(14, 14, 128) == (8, 16)
    assert pixel_box(7, 7, 64) == (8, 8)
    assert pixel_box(56, 56, 128) == (8, 16)
    assert pixel_box(1, 300, 64) == (1, 64)


def test_the_cooperative_schedule_takes_128x256_tiles_without_spilling():
    # two consumer warpgroups of 64 x 256 accumulators each (one would spill)
    spec = MatmulSpec(130, 264, 200, "bf16", "scale,bias,residual,relu6")
    config = KernelConfig(
        wgmma=True, wgmma_tile=(128, 256), stages=2, wgmma_schedule="cooperative"
    )
    _checked(spec, config)
    compiled = compile_to_ptx(spec, config, arch="sm_90a")
    resources = compiled.resources()
    assert compiled.launch.block == (384, 1, 1)
    assert resources.spill_stores == 0 and resources.registers < 255
    assert resources.advisories == ()  # ptxas serialized no wgmma


def test_cooperative_consumers_hand_stages_back_together():
    import re

    import numpy as np

    from affinec.base.locating_parser import parse_module
    from affinec.interpreter import Interpreter, InterpreterError
    from affinec.ir.context import make_context

    plan = GemmKernel(128, 64, 512, "f16", "f32", (), 128, 64, 2, "cooperative",
                      names=("a", "b", "out"))  # fmt: skip
    text = gemm_module_text(plan)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 512)).astype(np.float16)
    b = rng.standard_normal((512, 64)).astype(np.float16)

    def run(module_text: str) -> np.ndarray:
        out = np.full((128, 64), np.nan, np.float32)
        Interpreter(parse_module(make_context(), module_text)).run("matmul", a, b, out)
        return out

    reference = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(run(text) - reference).max() < 1e-4
    # a stage freed by one consumer's arrival: the barriers' phases go wrong
    one = re.sub(r"(init %empty\[%c\d\]), %c2", r"\1, %c1", text)
    with pytest.raises(InterpreterError, match="waits forever"):
        run(one)
    # the producer not waiting for the consumers: it reloads a stage in use
    eager = re.sub(r".*try_wait.parity %empty.*\n", "", text)
    with pytest.raises(InterpreterError, match="arrives on %bar"):
        run(eager)


@pytest.mark.parametrize("schedule", ["waited", "in-flight", "specialized"])
def test_wide_tiles_and_more_steps_than_stages(schedule):
    spec = MatmulSpec(130, 136, 320, "f16", "bias-relu")
    _checked(
        spec,
        KernelConfig(
            wgmma=True, wgmma_tile=(64, 256), stages=2, wgmma_schedule=schedule
        ),
    )


def test_a_1x1_convolution_compiles_as_its_pixels_product_with_tensor_maps():
    spec = ConvSpec(
        n=2, c=64, h=5, w=7, k=72, r=1, s=1, layout="nhwc", filter_layout="rsck",
        dtype="f16", epilogue="bias,residual,relu",
    )  # fmt: skip
    compiled = compile_to_ptx(spec, arch="sm_90a", wgmma=True, stages=2, check=True)
    assert "wgmma.mma_async" in compiled.ptx
    assert "cp.async.bulk.tensor" in compiled.ptx
    resources = compiled.resources()
    assert resources.spill_stores == 0 and resources.stack_frame == 0
    assert resources.advisories == ()
    kernel = compiled.runtime_kernel()
    assert [p.name for p in kernel.arguments] == [
        "input",
        "filter",
        "bias",
        "residual",
        "output",
    ]
    (launch,) = kernel.launches
    a_map, b_map, *rest = launch.tensor_maps
    assert rest == [None, None, None]
    # the maps span the product's matrices: pixels x channels, channels x filters
    assert (a_map.shape, a_map.box, a_map.swizzle) == ((70, 64), (128, 64), 128)
    assert (b_map.shape, b_map.box) == ((64, 72), (64, 64))
    assert launch.grid == (1, 1, 1) and launch.block == (128, 1, 1)


def test_the_runtime_encodes_each_map_once_per_address(monkeypatch):
    from affinec.backend import runtime

    compiled = compile_to_ptx(MatmulSpec(128, 64, 64, "f16"), arch="sm_90a", wgmma=True)
    kernel = compiled.runtime_kernel()
    encoded, launched = [], []
    monkeypatch.setattr(
        runtime.TiledTensorMap,
        "encode",
        lambda self, address: encoded.append((self.box, address)) or ("map", address),
    )
    monkeypatch.setattr(
        runtime,
        "launch_by_driver",
        lambda f, launch, values, s: launched.append(values),
    )
    monkeypatch.setitem(kernel.__dict__, "functions", {kernel.name: None})

    class Arg:
        def __init__(self, name, address):
            self.parameter = dataclasses.replace(kernel.parameters[0], name=name)
            self.span = (address, address + 1)

    arguments = [Arg("A", 0x1000), Arg("B", 0x2000), Arg("C", 0x3000)]
    kernel.launch(arguments)
    kernel.launch(arguments)
    assert encoded == [((64, 64), 0x1000), ((64, 64), 0x2000)]
    assert launched == [[("map", 0x1000), ("map", 0x2000), 0x3000]] * 2


@pytest.mark.parametrize(
    ("spec", "knobs", "arch", "message"),
    [
        (MatmulSpec(64, 64, 64, "f16"), {}, "sm_90", "which sm_90 does not have"),
        (MatmulSpec(64, 64, 64, "f32"), {}, "sm_90a", "f16 or bf16 operands, not f32"),
        (
            MatmulSpec(64, 64, 60, "f16"),
            {},
            "sm_90a",
            "k a multiple of 8 .TMA's rows 16 bytes apart., not 60",
        ),
        (MatmulSpec(64, 60, 64, "f16"), {}, "sm_90a", "n a multiple of 8"),
        (
            MatmulSpec(64, 64, 64, "f16"),
            {"wgmma_tile": (128, 256)},
            "sm_90a",
            "more accumulators than one warpgroup",
        ),
        (
            MatmulSpec(64, 64, 64, "f16"),
            {"wgmma_tile": (32, 64)},
            "sm_90a",
            "64 or 128 rows, not 32",
        ),
        (MatmulSpec(64, 64, 64, "f16"), {"stages": 1}, "sm_90a", "2 with MMAs"),
        (
            MatmulSpec(64, 64, 1024, "f16"),
            {"stages": 9, "wgmma_tile": (128, 128)},
            "sm_90a",
            "bytes of shared memory a block",
        ),
        (
            ConvSpec(1, 64, 8, 8, 64, 3, 3, dtype="f16"),
            {},
            "sm_90a",
            "needs an NHWC input and RSCK filters",
        ),
        (
            ConvSpec(
                1,
                64,
                9,
                8,
                64,
                3,
                3,
                stride=2,
                layout="nhwc",
                filter_layout="rsck",
                dtype="f16",
            ),
            {},
            "sm_90a",
            "an image the stride divides .9x8 by 2,2",
        ),
        (
            ConvSpec(
                1,
                32,
                8,
                8,
                64,
                3,
                3,
                stride=2,
                layout="nhwc",
                filter_layout="rsck",
                dtype="f16",
            ),
            {},
            "sm_90a",
            "c a multiple of 64 with a column stride",
        ),
        (
            ConvSpec(
                1,
                64,
                8,
                8,
                64,
                3,
                3,
                groups=2,
                layout="nhwc",
                filter_layout="rsck",
                dtype="f16",
            ),
            {},
            "sm_90a",
            "one group",
        ),
        (
            ConvSpec(
                1, 12, 8, 8, 64, 3, 3, layout="nhwc", filter_layout="rsck", dtype="f16"
            ),
            {},
            "sm_90a",
            "c a multiple of 8",
        ),
    ],
)
def test_what_the_route_cannot_take_is_refused_with_the_reason(
    spec, knobs, arch, message
):
    with pytest.raises((PassError, ValueError), match=message):
        compile_to_ptx(spec, arch=arch, wgmma=True, **{"stages": 2, **knobs})


def test_the_pass_refuses_ir_that_is_not_its_spec_s_naive_product():
    module = build(MatmulSpec(64, 64, 64, "f16"))
    Pipeline.parse(f"{TARGET},affine-loop-tile{{tile-sizes=16,16}}").run(module)
    with pytest.raises(PassError, match="needs that spec's naive IR, untouched"):
        Pipeline.parse("affinec-wgmma-gemm").run(module)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("tile-sizes=64", "takes two sizes"),
        ("schedule=eager", "schedule must be one of waited, in-flight, specialized"),
    ],
)
def test_illegal_options_are_refused(options, message):
    module = build(MatmulSpec(64, 64, 64, "f16"))
    with pytest.raises(PassError, match=message):
        Pipeline.parse(f"{TARGET},affinec-wgmma-gemm{{{options}}}").run(module)


def test_config_for_takes_the_largest_tile_that_fills_the_chip():
    big = MatmulSpec(4096, 4096, 1024, "f16")
    assert wgmma_config_for(big).wgmma_tile == (128, 128)
    small = MatmulSpec(1024, 512, 1024, "f16")  # 32 blocks of 128 x 128
    assert wgmma_config_for(small).wgmma_tile == (64, 64)
    conv = ConvSpec(
        8, 256, 14, 14, 1024, 1, 1, layout="nhwc", filter_layout="rsck", dtype="f16"
    )
    config = config_for(conv, arch="sm_90a", wgmma=True)
    assert config.flatten_pixels and config.wgmma
    with pytest.raises(ValueError, match="not sm_80"):
        config_for(big, arch="sm_80", wgmma=True)


def test_the_test_bed_is_the_same_kernel():
    from affinec.tools.hopper_matmul import matmul_module

    plan = GemmKernel(
        128, 64, 256, "f16", "f32", (), 64, 64, 2, "in-flight",
        names=("a", "b", "out"),
    )  # fmt: skip
    assert matmul_module(128, 64, 256, 2, 64, 64, in_flight=True) == gemm_module_text(
        plan
    )


def test_the_command_lines_take_the_route(tmp_path, capsys):
    from affinec.tools.cli import main

    out = tmp_path / "k.ptx"
    code = main(
        [
            "compile", "matmul", "--m=200", "--n=64", "--k=128", "--dtype=f16",
            "--arch=sm_90a", "--wgmma", "-o", str(out),
        ]
    )  # fmt: skip
    assert code == 0 and "wgmma.mma_async" in out.read_text()
    code = main(
        ["compile", "matmul", "--m=64", "--n=64", "--k=64", "--dtype=f16", "--wgmma"]
    )
    assert code == 1 and "sm_80" in capsys.readouterr().err


def test_the_tuner_s_space_on_sm_90a_has_hopper_kernels_that_compile():
    from affinec.tuning.compiling import COMPILED, Compilation
    from affinec.tuning.space import search_space

    spec = MatmulSpec(512, 256, 256, "f16", "bias-relu")
    space = search_space(spec, max_candidates=4, arch="sm_90a")
    hopper = [c for c in space.configs if c.wgmma]
    assert {c.wgmma_schedule for c in hopper} == {
        "in-flight",
        "specialized",
        "cooperative",
    }
    assert len({c.wgmma_tile for c in hopper}) > 1
    results = Compilation(spec.to_text(), tuple(hopper[:2]), "sm_90a", None).results()
    assert all(r.status == COMPILED for r in results), [r.reason for r in results]
    # not on chips without wgmma, nor for what the route does not take
    assert not any(c.wgmma for c in search_space(spec, max_candidates=4).configs)
    three = ConvSpec(
        1, 64, 14, 14, 64, 3, 3, padding=1, layout="nhwc", filter_layout="rsck",
        dtype="f16",
    )  # fmt: skip
    assert any(
        c.wgmma for c in search_space(three, max_candidates=4, arch="sm_90a").configs
    )
    strided = dataclasses.replace(three, h=15, stride=(2, 2))
    assert not any(
        c.wgmma for c in search_space(strided, max_candidates=4, arch="sm_90a").configs
    )


def test_more_stages_than_steps_of_k_are_cut_with_a_remark():
    spec = MatmulSpec(128, 64, 128, "f16")  # 2 steps of 64
    compiled = compile_to_ptx(spec, arch="sm_90a", wgmma=True, stages=4)
    (remark,) = compiled.remarks
    assert "4 stages asked for 2 steps of K: 2 (no more can be in flight)" in remark
    one_step = MatmulSpec(128, 64, 64, "f16")
    compiled = compile_to_ptx(one_step, arch="sm_90a", wgmma=True, stages=4)
    assert "4 stages asked for 1 steps of K: 2" in compiled.remarks[0]
    # two stages of 128x64 + 64x128 f16 tiles, the 128x128 f32 tile, 2 barriers
    stages = 2 * (128 * 64 + 64 * 128) * 2
    assert compiled.launch.dynamic_shared_memory == stages + 128 * 128 * 4 + 2 * 8


def test_a_strided_convolution_s_input_map_is_the_view_of_steps_and_phases():
    from affinec.dialects.affinec import LaunchRecord

    spec = ConvSpec(
        n=2, c=64, h=10, w=12, k=40, r=3, s=3, stride=2, padding=1, layout="nhwc",
        filter_layout="rsck", dtype="f16", epilogue="bias-relu",
    )  # fmt: skip
    compiled = compile_to_ptx(spec, arch="sm_90a", wgmma=True, stages=2)
    record = compiled.launch
    assert record.tensor_map_shapes == (("input", (2, 5, 2, 6, 128)),)
    # the record survives its attribute (affinec-opt prints and reads it back)
    assert LaunchRecord.from_attribute(record.to_attribute()) == record
    (launch,) = compiled.runtime_kernel().launches
    a_map = launch.tensor_maps[0]
    assert a_map.shape == (2, 5, 2, 6, 128) and a_map.box == (1, 8, 1, 16, 64)
    assert a_map.strides == (15360, 3072, 1536, 256, 2)


@pytest.mark.parametrize(
    ("spec", "tile", "schedule", "splits"),
    [
        (MatmulSpec(100, 72, 256, "f16", "bias-relu"), (64, 64), "in-flight", 2),
        (MatmulSpec(64, 64, 512, "bf16", "scale,bias,residual,relu6"), (64, 32),
         "specialized", 4),
        (ConvSpec(n=1, c=128, h=5, w=5, k=40, r=3, s=3, padding=1, layout="nhwc",
                  filter_layout="rsck", dtype="f16", epilogue="bias-relu"),
         (64, 64), "waited", 2),
        (ConvSpec(n=1, c=128, h=6, w=6, k=24, r=3, s=3, padding=1, stride=2,
                  layout="nhwc", filter_layout="rsck", dtype="f16",
                  epilogue="bias,residual,relu"),
         (128, 32), "cooperative", 2),
    ],
)  # fmt: skip
def test_split_k_partial_sums_are_added_by_a_second_kernel(
    spec, tile, schedule, splits
):
    # each split a layer of blocks (grid z) over its channel steps, writing f32
    # partials to the workspace; the sum kernel adds them in order, then the epilogue
    config = KernelConfig(
        wgmma=True, wgmma_tile=tile, stages=2, wgmma_schedule=schedule, splits=splits
    )
    _checked(spec, config)
    compiled = compile_to_ptx(spec, config, arch="sm_90a")
    first, second = compiled.launches
    assert first.grid[2] == splits and second.block == (256, 1, 1)
    assert [p.name for p in compiled.parameters if p.workspace] == ["partial"]
    assert first.outputs == ("partial",) and second.arguments[0].name == "partial"


def test_a_split_must_divide_the_channel_steps():
    with pytest.raises(PassError, match="splits=3: a divisor of the 8 steps of 64"):
        compile_to_ptx(
            MatmulSpec(64, 64, 512, "f16"), arch="sm_90a", wgmma=True, splits=3,
            stages=2,
        )  # fmt: skip


def test_split_kernels_launch_through_the_driver_with_the_workspace(monkeypatch):
    from affinec.backend import runtime

    spec = MatmulSpec(64, 64, 256, "f16")
    kernel = compile_to_ptx(
        spec, arch="sm_90a", wgmma=True, stages=2, splits=2
    ).runtime_kernel()
    launched = []
    monkeypatch.setattr(runtime.TiledTensorMap, "encode", lambda self, a: ("map", a))
    monkeypatch.setattr(
        runtime,
        "launch_by_driver",
        lambda f, launch, values, s: launched.append((launch.name, values)),
    )
    monkeypatch.setitem(
        kernel.__dict__, "functions", {launch.name: None for launch in kernel.launches}
    )

    class Buffer:
        __cuda_array_interface__ = {"data": (0x9000, False)}

    monkeypatch.setattr(
        kernel,
        "workspaces",
        lambda stream=None, torch_device=None: {"partial": Buffer()},
    )

    class Arg:
        def __init__(self, name, address):
            self.parameter = dataclasses.replace(kernel.parameters[0], name=name)
            self.span = (address, address + 1)

    kernel.launch([Arg("A", 0x1000), Arg("B", 0x2000), Arg("C", 0x3000)])
    assert launched == [
        ("matmul_kernel", [("map", 0x1000), ("map", 0x2000), 0x9000]),
        ("matmul_sum", [0x9000, 0x3000]),
    ]


def test_the_tuner_splits_deep_layers_of_few_blocks_on_the_route():
    from affinec.tuning.space import search_space

    deep = ConvSpec(
        1, 512, 7, 7, 512, 3, 3, padding=1, layout="nhwc", filter_layout="rsck",
        dtype="f16",
    )  # fmt: skip
    configs = search_space(deep, arch="sm_90a").configs
    assert any(c.wgmma and c.splits > 1 for c in configs)


@needs_mlir_opt
def test_mlir_opt_reads_the_route_s_kernels_as_the_same_ir():
    # a strided convolution, two consumers, split-K: host reshape, 5-D boxes,
    # per-consumer tiles, a workspace and two kernels. (MLIR 22's verifier takes
    # 128-byte swizzles only: B tiles of fewer than 64 columns are affinec's.)
    spec = ConvSpec(
        n=1, c=128, h=6, w=6, k=64, r=3, s=3, padding=1, stride=2, layout="nhwc",
        filter_layout="rsck", dtype="f16", epilogue="bias-relu",
    )  # fmt: skip
    module = build(spec)
    Pipeline.parse(
        f"{TARGET},affinec-wgmma-gemm{{tile-sizes=128,64 stages=2 "
        "schedule=cooperative splits=2}"
    ).run(module)
    text = printed(module)
    assert same_ir(text, mlir_opt(text))


def test_the_copy_out_moves_16_bytes_a_thread_through_the_epilogue():
    """Eight f16 outputs a thread: two 16-byte loads of the f32 tile, the epilogue's
    operands read 16 bytes at a time, one 16-byte store; checked by the interpreter
    at every level, then in the PTX."""
    import re

    spec = ConvSpec(
        1, 16, 4, 4, 32, 1, 1, layout="nhwc", filter_layout="rsck", dtype="f16",
        epilogue="bias,residual,relu6",
    )  # fmt: skip
    config = dataclasses.replace(wgmma_config_for(spec, "sm_90a"), wgmma_tile=(64, 32))
    module = build(spec)
    Pipeline([*Pipeline.parse(TARGET).passes, *wgmma_passes(config)]).run(
        module, check=True
    )
    ptx = compile_to_ptx(spec, config, arch="sm_90a").ptx
    stores = re.findall(r"\bst\.global\.[.a-z0-9]+", ptx)
    assert stores == ["st.global.v4.b32"]
    assert len(re.findall(r"\bld\.shared\.v4\.b32", ptx)) == 2  # 8 f32 of the tile
    assert len(re.findall(r"\bld\.global\.nc\.v4\.b32", ptx)) == 2  # bias, residual
