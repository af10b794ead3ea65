"""`affinec-mma-sync`: the accumulation on tensor cores, proven on the CPU.

The interpreter runs `ldmatrix` and `mma.sync` warp by warp with the PTX ISA's
fragment layouts, so a wrong lane address or fragment element is a wrong answer here.
The MMA sums in its own order: its level and the ones below are held to the dtype's
tolerance against float64 (and bit for bit to each other); every level before it
stays bit-identical. Random specs (f16, bf16, f32 in tf32), tiles and warp grids; the lanes'
address expressions against `affinec.ir.mma_layouts`; refusals located.
"""

import pytest
from hypothesis import given, settings

from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec
from affinec.dialects import nvgpu
from affinec.driver.benchmark import DESIGN_CONVOLUTIONS, with_format
from affinec.driver.checking import Checker
from affinec.driver.config import KernelConfig, config_for, flattened_spec
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import affine_passes, default_passes
from affinec.frontend.naive import build
from affinec.ir import mma_layouts
from affinec.ir.context import make_context
from strategies import examples, mma_cases


@settings(max_examples=examples(20))  # each runs ~19 stages
@given(mma_cases())
def test_the_mma_pipeline_keeps_the_result(case):
    spec, config = case
    module = build(spec)
    Pipeline(default_passes(config)).run(module, check=True)


def test_the_pass_changes_the_rounding_and_says_so():
    from affinec.passes.affinec_mma_sync import AffinecMmaSync

    assert AffinecMmaSync().changes_rounding


def _expr_values(expr_text: str) -> list:
    return [eval(expr_text, {"lane": lane}) for lane in range(32)]  # noqa: S307


def test_lane_addresses_are_the_ptx_layouts():
    # The expressions affinec-mma-sync builds (mma_fragments.py, mma_writeback.py),
    # written as Python over the lane, against the layouts the interpreter executes.
    a_rows = _expr_values("lane % 8 + (lane // 8) % 2 * 8")
    a_cols = _expr_values("lane // 16 * 8")
    assert [mma_layouts.a_tile_address(lane) for lane in range(32)] == list(
        zip(a_rows, a_cols, strict=True)
    )
    n_rows = _expr_values("lane % 8")
    k_cols = _expr_values("(lane // 8) % 2 * 8")
    assert [mma_layouts.b_tile_address(lane, 2, True) for lane in range(32)] == list(
        zip(n_rows, k_cols, strict=True)
    )
    k_rows = _expr_values("lane % 16")
    assert [mma_layouts.b_tile_address(lane, 2, False) for lane in range(32)] == [
        (k, 0) for k in k_rows
    ]
    kind = nvgpu.MmaKind(16, 8, 16, "f16")
    for lane in range(32):
        for e in range(4):
            row = lane // 4 + (e // 2) * 8
            col = (lane % 4) * 2 + e % 2
            assert mma_layouts.c_element(kind, lane, e // 2, e % 2) == (row, col)


def _promoted(spec, config):
    module = build(spec)
    Pipeline(
        [*affine_passes(config), *Pipeline.parse("affinec-place-buffers").passes]
    ).run(module)
    return module


def test_f32_operands_are_refused():
    spec = ConvSpec(
        1, 16, 6, 6, 16, 3, 3, padding=1, layout="nhwc", filter_layout="rsck"
    )
    config = KernelConfig(
        tile_sizes=(1, 2, 6, 16), reduction_tile_sizes=(1, 1, 16), mma=True
    )
    module = _promoted(spec, config)
    with pytest.raises(PassError, match="tensor cores take f16 or bf16 operands"):
        Pipeline.parse("affinec-mma-sync").run(module)


def test_tf32_checks_f32_operands_to_tf32s_tolerance():
    spec = ConvSpec(
        1, 16, 6, 6, 16, 3, 3, padding=1, layout="nhwc", filter_layout="rsck"
    )
    config = KernelConfig(
        tile_sizes=(1, 2, 6, 16),
        reduction_tile_sizes=(1, 1, 16),
        reassociate=True,
        mma=True,
        warp_grid=(1, 2),
        tf32=True,
    )
    module = build(spec)
    checker = Checker(spec)
    assert checker.check("input", module).ok
    ctx = make_context()
    results = []
    for p in default_passes(config):
        p.apply(ctx, module)
        results.append(checker.check_pass(p, module))
        assert results[-1].ok, results[-1].message
    mma = next(r for r in results if r.stage.startswith("affinec-mma-sync"))
    # tf32 keeps 10 bits of mantissa: further from float64 than f32's own 1e-5,
    # inside tf32's tolerance, which then holds for the stages below.
    assert 1e-5 < mma.error < 2e-2
    assert checker.precision == "tf32"
    text = str(module)
    assert "nvvm.mma.sync" in text and "#nvvm.mma_type<tf32>" in text


def test_tf32_needs_the_tensor_cores():
    with pytest.raises(ValueError, match="needs mma"):
        KernelConfig(tf32=True)


def test_unpromoted_operands_are_refused():
    spec = ConvSpec(1, 16, 6, 6, 16, 3, 3, padding=1, dtype="f16")
    module = build(spec)
    Pipeline.parse("affinec-tile-split-sink,affinec-place-buffers").run(module)
    before = str(module)
    with pytest.raises(PassError, match="read from a shared tile"):
        Pipeline.parse("affinec-mma-sync").run(module)
    assert str(module) == before


@pytest.mark.parametrize(
    ("option", "message"),
    [("warp-grid=1", "two sizes"), ("warp-grid=8,8", "between 1 and 32 warps")],
)
def test_illegal_warp_grids_are_refused(option, message):
    spec = ConvSpec(1, 16, 6, 6, 16, 3, 3, padding=1, dtype="f16")
    config = KernelConfig(
        tile_sizes=(1, 16, 2, 6), reduction_tile_sizes=(16, 3, 3), mma=True
    )
    module = _promoted(spec, config)
    with pytest.raises(PassError, match=message):
        Pipeline.parse(f"affinec-mma-sync{{{option}}}").run(module)


# -- software pipelining (affine-pipeline-data-transfer) ---------------------------------


def _pipelined(stages: int = 3):
    spec = ConvSpec(
        1,
        32,
        6,
        6,
        16,
        3,
        3,
        padding=1,
        layout="nhwc",
        filter_layout="rsck",
        dtype="f16",
    )
    config = KernelConfig(
        tile_sizes=(1, 2, 6, 16),
        reduction_tile_sizes=(1, 1, 16),
        mma=True,
        warp_grid=(1, 1),
        stages=stages,
    )
    return spec, config


@pytest.mark.parametrize("stages", [2, 3])
def test_pipelined_copies_keep_the_result(stages):
    spec, config = _pipelined(stages)
    module = build(spec)
    Pipeline(default_passes(config)).run(module, check=True)
    waits = [o for o in module.walk() if o.name == "nvvm.cp.async.wait.group"]
    assert waits and all(w.n.value.data == stages - 1 for w in waits)  # pyright: ignore


def test_a_missing_wait_is_a_race():
    spec, config = _pipelined(2)
    module = build(spec)
    passes = default_passes(config)
    stop = next(k for k, p in enumerate(passes) if p.name == "affinec-map-threads")
    Pipeline(passes[: stop + 1]).run(module)
    from affinec.driver.checking import Checker

    assert Checker(spec).check("mapped", module).ok
    (wait,) = [o for o in module.walk() if isinstance(o, nvgpu.DeviceAsyncWaitOp)]
    wait.detach()
    wait.erase()
    result = Checker(spec).check("no wait", module)
    assert not result.ok and "race" in result.message


def test_pipelining_refuses_a_stage_count_out_of_range():
    spec, config = _pipelined(2)
    module = build(spec)
    Pipeline(affine_passes(KernelConfig(**{**config.__dict__, "stages": 1}))).run(
        module
    )
    with pytest.raises(PassError, match="stages must be between 2 and 8"):
        Pipeline.parse("affine-pipeline-data-transfer{stages=9}").run(module)


def test_the_default_step_spans_the_filter_window():
    # 16-channel multiples: config_for copies the input tile's halo once for all nine
    # taps (one step over the whole window), and the result still checks.
    spec = ConvSpec(
        1, 16, 5, 8, 16, 3, 3, padding=1, dtype="f16", layout="nhwc",
        filter_layout="rsck", epilogue="relu",
    )  # fmt: skip
    config = config_for(spec)
    assert config.mma and config.reduction_tile_sizes == (3, 3, 16)
    Pipeline(default_passes(config)).run(build(spec), check=True)


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
@pytest.mark.parametrize("name", list(DESIGN_CONVOLUTIONS))
@pytest.mark.parametrize("dtype", ["f16", "tf32"])
def test_config_for_fits_shared_memory(name, dtype, layout):
    """config_for's estimate of a step's shared tiles is never below what the
    passes allocate: every benchmark convolution compiles with the stages it picks
    (ResNet-50's first layer, 4 channels padded to tf32's k, once did not)."""
    stored = "f32" if dtype == "tf32" else dtype
    spec = with_format(DESIGN_CONVOLUTIONS[name], stored, layout)
    config = config_for(spec, tf32=dtype == "tf32")
    # a 1x1 configured as the product of its flattened pixels compiles the product
    routed = flattened_spec(spec) if config.flatten_pixels else spec
    Pipeline(default_passes(config)).run(build(routed))


# -- the epilogue's stores -------------------------------------------------------------


def _epilogue(spec: ConvSpec, **knobs):
    from affinec.driver.compiler import compile_to_ptx

    knobs = {"stage_output": False, **knobs}
    config = config_for(spec, tf32=spec.dtype == "f32")
    compiled = compile_to_ptx(
        spec, KernelConfig(**{**config.__dict__, **knobs}), check=True
    )
    stores = [
        str(o.attributes.get("memref", ""))
        for o in compiled.module.walk()
        if o.name == "llvm.store"
    ]
    # what the runtime returns: the output, whatever stores to it (none of its
    # stores is a scalar one when the epilogue is staged)
    assert compiled.launch.outputs == ("output",)
    return compiled.ptx, stores


def _small_conv(**changes) -> ConvSpec:
    """A 3x3 convolution of 5 x 6 pixels, 16 channels, NHWC, with bias and ReLU."""
    import dataclasses

    spec = ConvSpec(
        1,
        16,
        5,
        6,
        16,
        3,
        3,
        padding=1,
        layout="nhwc",
        filter_layout="rsck",
        dtype="f16",
        epilogue="bias-relu",
    )
    return dataclasses.replace(spec, **changes)


@pytest.mark.parametrize(
    ("dtype", "k", "paired"),
    [
        ("f16", 16, "st.global.b32"),
        ("bf16", 12, "st.global.b32"),
        ("f32", 8, "st.global.v2.b32"),
    ],
)
def test_the_epilogue_stores_adjacent_channels_in_pairs(dtype, k, paired):
    # NHWC: a lane's two adjacent channels are adjacent in the output: one store of
    # both (with the scalar store of the first where a partial tile cuts the second
    # off: K = 12 in blocks of 8 channels).
    spec = _small_conv(dtype=dtype, k=k)
    knobs = {"tile_sizes": (1, 2, 3, 8)} if k == 12 else {}
    ptx, _ = _epilogue(spec, **knobs)
    assert paired in ptx
    scalar = "st.global.b16" if dtype != "f32" else "st.global.b32"
    assert (scalar in ptx) == (k == 12)


@pytest.mark.parametrize(
    "changes", [{"k": 7}, {"layout": "nchw", "filter_layout": "kcrs"}]
)
def test_the_epilogue_stores_one_by_one_where_pairs_are_not_adjacent(changes):
    # an odd channel count leaves every other pair misaligned; NCHW puts pixels, not
    # channels, innermost
    spec = _small_conv(epilogue="none", **changes)
    ptx, _ = _epilogue(spec)
    assert "st.global.b16" in ptx and "st.global.b32" not in ptx


def test_a_misaligned_vector_store_is_an_interpreter_error():
    import numpy as np

    from affinec.interpreter.llvm_ops import _store
    from affinec.interpreter.support import InterpreterError

    buffer = np.zeros(8, np.float16)
    _store(None, (buffer, 2), np.array([1, 2], np.float16))
    assert list(buffer[2:4]) == [1, 2]
    with pytest.raises(InterpreterError, match="not aligned to its size"):
        _store(None, (buffer, 3), np.array([1, 2], np.float16))
    with pytest.raises(InterpreterError, match="out of bounds"):
        _store(None, (buffer, 8), np.array([1, 2], np.float16))


@pytest.mark.parametrize(
    ("dtype", "k", "tiles"),
    [
        ("f16", 16, None),
        ("bf16", 24, (1, 2, 3, 16)),
        ("f16", 32, (1, 5, 4, 16)),
        ("f32", 8, None),
    ],
)
def test_the_staged_epilogue_stores_16_bytes_a_thread(dtype, k, tiles):
    # the fragments through bias and ReLU into a shared tile, a barrier, then 16
    # bytes of a pixel's channels a thread; partial tiles of pixels and channels
    # (K = 24 in blocks of 16, 5 x 6 pixels in 2 x 3 and 5 x 4), and 4 f32 (tf32)
    # a thread; every level interpreted against float64
    knobs = {"stage_output": True}
    if tiles:
        knobs["tile_sizes"] = tiles
    ptx, _ = _epilogue(_small_conv(dtype=dtype, k=k), **knobs)
    assert "st.global.v4.b32" in ptx and "ld.shared.v4.b32" in ptx
    assert "st.global.b32" not in ptx and "st.global.b16" not in ptx


@pytest.mark.parametrize(
    "changes", [{"k": 12}, {"layout": "nchw", "filter_layout": "kcrs"}]
)
def test_the_epilogue_is_not_staged_where_16_byte_runs_do_not_line_up(changes):
    # 12 f16 channels: every other pixel's run starts 8 bytes off 16; NCHW puts
    # pixels innermost. As without the option.
    spec = _small_conv(**changes)
    knobs = {"stage_output": True}
    if spec.k == 12:
        knobs["tile_sizes"] = (1, 2, 3, 8)
    ptx, _ = _epilogue(spec, **knobs)
    assert "st.global.v4.b32" not in ptx and "ld.shared" not in ptx


def test_the_staged_epilogue_without_its_barrier_is_a_race():
    # affinec-insert-barriers puts one between the tile's writes and its copy-out
    from affinec.dialects import affine, gpu
    from affinec.dialects.affinec import BLOCK, THREAD, mapping_of

    spec = _small_conv()
    config = KernelConfig(
        **{**config_for(spec).__dict__, "stage_output": True, "stages": 1}
    )
    passes = default_passes(config)
    mma = next(k for k, p in enumerate(passes) if p.name == "affinec-mma-sync")
    module = build(spec)
    Pipeline(passes[: mma + 1]).run(module)
    bands = [
        o
        for o in module.walk()
        if isinstance(o, affine.ParallelOp) and mapping_of(o) in (BLOCK, THREAD)
    ]
    copy_out = next(
        b for b in bands if any(isinstance(o, affine.VectorLoadOp) for o in b.walk())
    )
    assert Checker(spec).check("staged", module).ok
    barrier = copy_out.prev_op
    assert isinstance(barrier, gpu.BarrierOp)
    barrier.detach()
    barrier.erase()
    result = Checker(spec).check("without the barrier", module)
    assert not result.ok and "race" in result.message
    assert "output_shared" in result.message


def test_a_misaligned_vector_load_is_an_interpreter_error():
    import numpy as np

    from affinec.interpreter.llvm_ops import _load_vector
    from affinec.interpreter.support import InterpreterError

    buffer = np.arange(16, dtype=np.float16)
    assert list(_load_vector(None, (buffer, 8), 8)) == list(range(8, 16))
    with pytest.raises(InterpreterError, match="not aligned to its size"):
        _load_vector(None, (buffer, 4), 8)
    with pytest.raises(InterpreterError, match="out of bounds"):
        _load_vector(None, (buffer, 16), 8)


def test_a_grouped_convolution_not_in_nhwc_rsck_is_refused_with_the_reason():
    spec = ConvSpec(
        n=1, c=4, h=3, w=3, k=4, r=1, s=1, layout="nchw", dtype="f16", groups=2
    )
    config = KernelConfig(
        tile_sizes=(1, 1, 2, 1, 1), reduction_tile_sizes=(2, 1, 1), mma=True
    )
    with pytest.raises(PassError, match="channels must be the tile's innermost"):
        Pipeline(default_passes(config)).run(build(spec))
