"""`affinec-split-reduction` (split-K): the partial sums and the band that adds them,
checked by the interpreter at every level on random specs and configurations; its
refusals; the two kernels through the compiler, the runtime's parameters and
ptxas."""

import dataclasses

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from affinec.backend.ptxas import assemble
from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec, MatmulSpec, OuterSpec
from affinec.dialects.affinec import split_count
from affinec.driver.checking import Checker
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import (
    MIN_SPLIT_CHANNELS,
    MULTIPROCESSORS,
    config_for,
    grid_blocks,
    split_spec,
)
from affinec.driver.kernel_config import KernelConfig
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.passes.affinec_split_reduction import AffinecSplitReduction
from affinec.testing import conv_specs, kernel_configs, matmul_specs
from strategies import examples


def _channels(spec) -> int:
    return spec.c // spec.groups if isinstance(spec, ConvSpec) else spec.k


def _split(spec, splits: int):
    module = build(spec)
    Pipeline([AffinecSplitReduction(splits=splits)]).run(module)
    return module


splittable = st.one_of(conv_specs(), matmul_specs())

tensor_core_sized = st.builds(
    MatmulSpec,
    m=st.integers(16, 28),
    n=st.sampled_from([8, 16]),
    k=st.sampled_from([96, 160]),
    dtype=st.sampled_from(["f16", "bf16"]),
    epilogue=st.just("none"),
)
"""Contractions the tuner sends down the tensor-core route, with reduction tiles of
32 or more: their splits' last steps can be partial."""


@given(spec=splittable, data=st.data())
@settings(max_examples=examples(40), deadline=None)
def test_the_partial_sums_add_up_to_the_contraction(spec, data):
    """Any split count up to the channels, dividing them or not: within the dtype's
    tolerance of float64, and one split bit-identical to none."""
    splits = data.draw(st.integers(1, min(_channels(spec), 6)))
    checker = Checker(spec, seed=data.draw(st.integers(0, 99)))
    assert checker.check("naive", build(spec)).ok
    result = checker.check("split", _split(spec, splits), reorders=splits > 1)
    assert result.ok, result.message
    if splits == 1:
        assert result.versus == "bit-identical"


@given(spec=st.one_of(splittable, tensor_core_sized), data=st.data())
@settings(max_examples=examples(25), deadline=None)
def test_split_kernels_are_checked_at_every_level(spec, data):
    """The tuner's configurations with a split: the two kernels interpreted after
    every pass down to the llvm level (partial tiles, epilogues, both routes). The
    configuration comes from the search space of one split's share, or of the
    whole reduction (a reduction tile that need not divide a split's channels, so
    that a split's last step is partial, on either route)."""
    splits = data.draw(st.integers(2, min(max(_channels(spec), 2), 4)))
    if _channels(spec) < splits:
        splits = 1
    whole = splits == 1 or data.draw(st.booleans())
    drawn = data.draw(kernel_configs(spec if whole else split_spec(spec, splits)))
    # (few channels a split: the padded or coalesced route, which splits refuse)
    assume(splits == 1 or not (drawn.pad_channels > 1 or drawn.coalesce_reduction))
    config = dataclasses.replace(drawn, splits=splits)
    module = build(spec)
    Pipeline(default_passes(config)).run(module, check=True)


def test_one_split_is_the_unsplit_result_bit_for_bit_through_the_gpu_level():
    spec = ConvSpec(
        1,
        20,
        6,
        6,
        16,
        3,
        3,
        padding=1,
        dtype="f16",
        layout="nhwc",
        filter_layout="rsck",
        epilogue="bias-relu",
    )
    checker = Checker(spec)
    unsplit, split = build(spec), _split(spec, 1)
    config = config_for(spec)
    Pipeline(default_passes(config)).run(unsplit)
    Pipeline(default_passes(config)).run(split)
    assert checker.check("unsplit", unsplit).ok
    assert checker.check("split once", split).versus == "bit-identical"


def test_the_ir_of_a_split():
    module = _split(MatmulSpec(4, 6, 10, epilogue="relu"), 3)
    text = str(module)
    assert "%partials: memref<3x4x6xf32> {affinec.workspace}" in text
    assert "affine.for %p = 0 to 4" in text  # 10 channels padded to 12, 4 a split
    assert "affinec.padded_load %A[%i, %sk * 4 + %p]" in text
    assert "{affinec.splits = 3 : i64}" in text
    assert text.count("arith.maximumf") == 1  # the epilogue once, after the sum
    assert split_count(module) == 3


@pytest.mark.parametrize(
    ("spec", "splits", "message"),
    [
        (MatmulSpec(4, 4, 8), 0, "splits must be between 1 and 64, got 0"),
        (MatmulSpec(4, 4, 80), 65, "splits must be between 1 and 64, got 65"),
        (MatmulSpec(4, 4, 3), 4, "splits=4 needs at least 4 iterations"),
        (OuterSpec(4, 4), 2, "a outer has no reduction to split"),
        (
            ConvSpec(
                1, 8, 4, 4, 8, 1, 1, groups=2, layout="nhwc", filter_layout="rsck"
            ),
            3,
            "cannot be padded",
        ),
    ],
)
def test_a_split_that_cannot_work_is_refused(spec, splits, message):
    with pytest.raises(PassError, match=message):
        _split(spec, splits)


def test_a_split_module_is_not_split_again_nor_after_tiling():
    spec = MatmulSpec(4, 4, 8)
    module = _split(spec, 2)
    with pytest.raises(PassError, match="is already split"):
        Pipeline([AffinecSplitReduction(splits=2)]).run(module)
    tiled = build(spec)
    Pipeline(default_passes(config_for(spec))[:1]).run(tiled)
    with pytest.raises(PassError, match="before affine-loop-tile"):
        Pipeline([AffinecSplitReduction(splits=2)]).run(tiled)


def test_affinec_default_after_a_split_configures_for_it():
    spec = ConvSpec(
        1,
        64,
        7,
        7,
        32,
        3,
        3,
        padding=1,
        dtype="f16",
        layout="nhwc",
        filter_layout="rsck",
    )
    module = build(spec)
    pipeline = Pipeline.for_module(
        "affinec-split-reduction{splits=4},affinec-default", module
    )
    names = [p.name for p in pipeline.passes]
    assert names.count("affinec-split-reduction") == 1
    tile = pipeline.passes[1]
    assert tile.reduction_tile_sizes == config_for(spec, splits=4).reduction_tile_sizes
    # and on a module split already
    split = _split(spec, 4)
    again = Pipeline.for_module("affinec-default", split)
    assert "affinec-split-reduction" not in [p.name for p in again.passes]


def test_splits_with_padded_or_coalesced_channels_are_refused():
    from affinec.driver.config import KernelConfig

    with pytest.raises(ValueError, match="splits cut the channels"):
        KernelConfig(mma=True, coalesce_reduction=True, splits=2)
    with pytest.raises(ValueError, match="splits cut the channels"):
        KernelConfig(mma=True, pad_channels=4, splits=2)


@pytest.mark.parametrize(
    "c, h, k, r, stride",
    [(1024, 14, 256, 1, 1), (256, 28, 256, 3, 2), (2048, 7, 512, 1, 1)],
)
def test_config_for_splits_a_grid_of_less_than_one_wave(c, h, k, r, stride):
    """ResNet-50's deep layers at batch 1 launch a few dozen blocks of the chip's
    132 unsplit: `config_for` splits their channels into as many grids as fill the
    chip once, and no more; `splits=1` keeps the spec's own grid."""
    spec = ConvSpec(
        1,
        c,
        h,
        h,
        k,
        r,
        r,
        stride=stride,
        padding=r // 2,
        dtype="f16",
        layout="nhwc",
        filter_layout="rsck",
    )
    unsplit = config_for(spec, splits=1)
    config = config_for(spec)
    blocks = grid_blocks(spec, unsplit)
    assert unsplit.splits == 1 and blocks < MULTIPROCESSORS
    assert config.splits > 1 and config.mma
    assert blocks * config.splits <= MULTIPROCESSORS < blocks * config.splits * 2 or (
        c // (config.splits * 2) < MIN_SPLIT_CHANNELS
    )
    assert c // config.splits >= MIN_SPLIT_CHANNELS
    assert config == config_for(spec, splits=config.splits)


def test_config_for_leaves_a_full_grid_and_any_batch_unsplit():
    full = ConvSpec(
        32,
        64,
        56,
        56,
        64,
        3,
        3,
        padding=1,
        dtype="f16",
        layout="nhwc",
        filter_layout="rsck",
    )
    assert grid_blocks(full, config_for(full, splits=1)) >= MULTIPROCESSORS
    assert config_for(full) == config_for(full, splits=1, flatten_pixels=False)
    deep = ConvSpec(
        1,
        1024,
        14,
        14,
        256,
        1,
        1,
        dtype="f16",
        layout="nhwc",
        filter_layout="rsck",
        dynamic_batch=True,
    )
    assert config_for(deep).splits == 1  # a split's workspace is sized by the batch
    f32 = dataclasses.replace(deep, dtype="f32", dynamic_batch=False)
    assert config_for(f32).splits == 1  # the SIMT route: not measured split


def test_config_for_a_split_plans_one_splits_channels():
    spec = ConvSpec(
        1,
        512,
        7,
        7,
        512,
        3,
        3,
        padding=1,
        dtype="f16",
        layout="nhwc",
        filter_layout="rsck",
    )
    config = config_for(spec, splits=8)
    assert config.splits == 8 and config.mma
    assert split_spec(spec, 8).c == 64
    with pytest.raises(ValueError, match="the reduction has 4 channels a group"):
        config_for(dataclasses.replace(spec, c=4), splits=8)
    with pytest.raises(ValueError, match="too few channels for the tensor cores' k"):
        conv1 = dataclasses.replace(
            spec, c=3, h=224, w=224, k=64, r=7, s=7, stride=(2, 2), padding=(3, 3)
        )
        config_for(conv1, splits=2)


def test_a_split_compiles_to_two_kernels_and_the_runtime_owns_the_workspace():
    spec = ConvSpec(
        1,
        512,
        7,
        7,
        512,
        3,
        3,
        padding=1,
        dtype="f16",
        layout="nhwc",
        filter_layout="rsck",
        epilogue="bias-relu",
    )
    unsplit = compile_to_ptx(spec, config_for(spec, splits=1), arch="sm_90")
    for arch in ("sm_80", "sm_90"):
        compiled = compile_to_ptx(spec, config_for(spec, splits=8), arch=arch)
        first, second = compiled.launches
        assert first.grid[0] == 8 * unsplit.launch.grid[0]  # eight times the blocks
        assert [a.name for a in first.arguments] == ["input", "filter", "partials"]
        assert first.outputs == ("partials",) and second.outputs == ("output",)
        resources = assemble(compiled.ptx, arch)
        assert set(resources) == {first.kernel, second.kernel}
        assert all(r.spill_stores == 0 for r in resources.values())
    kernel = compiled.runtime_kernel()
    assert [p.name for p in kernel.arguments] == ["input", "filter", "bias", "output"]
    assert [p.name for p in kernel.parameters if p.workspace] == ["partials"]
    assert [launch.name for launch in kernel.launches] == [first.kernel, second.kernel]
    assert "partials" not in kernel.signature()


def test_the_tuners_space_tries_splits_where_blocks_are_few():
    from affinec.tuning.problem import geometry, problem_of
    from affinec.tuning.space import search_space

    deep = ConvSpec(
        1, 512, 7, 7, 512, 3, 3, padding=1, dtype="f16", layout="nhwc",
        filter_layout="rsck",
    )  # fmt: skip
    wide = dataclasses.replace(deep, n=32, c=64, h=56, w=56, k=64)
    candidates = search_space(deep).candidates
    splits = {c.config.splits for c in candidates}
    assert splits - {1}, "a layer of 8 blocks gets split candidates"
    problem = problem_of(deep)
    for c in candidates:
        # the model counts the split's blocks and one split's reduction
        g = geometry(problem, c.config)
        assert g.reduction_extents[-1] == -(-512 // c.config.splits)
    assert {c.config.splits for c in search_space(wide).candidates} == {1}


def test_a_band_of_partial_sums_without_splits_is_refused_at_tiling():
    """A split band whose split dimension runs from 0 to 0 (found by the fuzzer: an
    internal error where the tiling dropped that dimension)."""
    module = _split(MatmulSpec(8, 8, 48, dtype="f16"), 3)
    text = str(module).replace("to (3, 8, 8)", "to (0, 8, 8)")
    from affinec.base.locating_parser import parse_module
    from affinec.ir.context import make_context
    from affinec.passes.affine_loop_tile import AffineLoopTilePass

    mutated = parse_module(make_context(), text)
    with pytest.raises(PassError, match="split dimension has no constant extent"):
        Pipeline([AffineLoopTilePass(tile_sizes=(8, 8))]).run(mutated)


@pytest.mark.parametrize(
    "k, splits, tile",
    [(80, 1, 32), (320, 4, 32), (160, 2, 32), (96, 1, 32), (96, 2, 32), (320, 4, 16)]
    + [(100, 2, 32), (72, 2, 32)],
)
def test_a_split_whose_last_step_is_partial_on_tensor_cores(k, splits, tile):
    """A reduction tile that does not divide a split's channels (80 a split in tiles
    of 32: the last step has 16; 50 in 32: 18, not a whole MMA; 36: 4): the MMAs read
    the whole tile, whose channels past the step's end hold the next split's, which
    the pass zeroes first. Interpreted after every pass."""
    spec = MatmulSpec(28, 16, k, dtype="f16", epilogue="none")
    config = KernelConfig(
        tile_sizes=(28, 16),
        reduction_tile_sizes=(tile,),
        reassociate=True,
        stages=3,
        mma=True,
        warp_grid=(1, 2),
        stage_output=True,
        splits=splits,
    )
    Pipeline(default_passes(config)).run(build(spec), check=True, seed=0)


@pytest.mark.parametrize("mma", [True, False], ids=["mma", "simt"])
def test_a_convolution_split_whose_last_step_is_partial(mma):
    """96 channels in two splits of 48, steps of 32 channels: on both routes."""
    spec = ConvSpec(
        1, 96, 4, 4, 16, 3, 3, padding=1, dtype="f16", layout="nhwc",
        filter_layout="rsck", epilogue="none",
    )  # fmt: skip
    base = config_for(spec)
    assert base.mma
    config = dataclasses.replace(
        base,
        reduction_tile_sizes=(*base.reduction_tile_sizes[:-1], 32),
        splits=2,
        **({} if mma else {"mma": False, "stage_output": False, "unroll_taps": False}),
    )
    Pipeline(default_passes(config)).run(build(spec), check=True, seed=0)
