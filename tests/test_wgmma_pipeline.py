"""`affinec-wgmma`: Hopper's warpgroup MMA in the tensor-core route's pipeline, proven
on the CPU.

The pass takes `affinec-mma-sync`'s place (`KernelConfig.tensor_core="wgmma"`), every
other pass the same. The interpreter runs each stage against the one before and
float64: the `affinec.warpgroup_mma` steps (reading the tiles where their layout
puts them), the planner's interleaved tiles, and the lowered `wgmma.mma_async`
reading the tiles through real 64-bit descriptors (a wrong leading or stride byte
offset reads other elements: the negative controls below). Random products and
1x1 convolutions through their flattened pixels; the PTX through ptxas for sm_90a;
bad inputs refused, located.
"""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_edits import set_i64_constant
from xdsl.dialects.builtin import MemRefType

from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.driver.checking import Checker
from affinec.driver.config import KernelConfig
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes, map_to_gpu_passes
from affinec.frontend.naive import build
from affinec.hardware.wgmma_layouts import MatrixDescriptor
from affinec.ir.context import make_context
from affinec.passes.affinec_mma_sync import AffinecMmaSync
from affinec.passes.affinec_wgmma import AffinecWgmma
from affinec.transforms.nvvm.wgmma_steps import wgmma_fields

TARGET = "nvvm-attach-target{chip=sm_90a}"


def _config(**knobs) -> KernelConfig:
    # the promotion's cp.async copies (tests/test_wgmma_tma.py: TMA's loads)
    base = KernelConfig(
        tile_sizes=(64, 64),
        reduction_tile_sizes=(32,),
        mma=True,
        tensor_core="wgmma",
        stages=2,
        tma=False,
    )
    return replace(base, **knobs)


def _passes(config: KernelConfig, target: str = TARGET) -> list:
    return [*Pipeline.parse(target).passes, *default_passes(config)]


@st.composite
def wgmma_cases(draw):
    """A product the route takes (partial tiles along every dimension included)
    and a configuration of it."""
    warpgroups = draw(st.integers(1, 2))
    bm = 64 * warpgroups
    bn = 8 * draw(st.integers(1, 6))
    bk = draw(st.sampled_from([16, 32]))
    # at least one whole tile (a smaller product clips the tile, which the
    # configuration must not ask of the warpgroups), partial ones past it
    m = draw(st.integers(bm, bm + 40))
    n = 8 * draw(st.integers(bn // 8, bn // 8 + 2))
    splits = draw(st.sampled_from([1, 1, 2]))
    # a split's channels at least one step: a last step cut short is zeroed past
    # its channels (the next split's, which the copies bring); a split's K whole
    # wgmma steps (a separated last tile is its own step)
    k = 16 * splits * draw(st.integers(bk // 16, 3 * bk // 16))
    epilogue = draw(st.sampled_from(["none", "bias-relu"]))
    spec = MatmulSpec(m, n, k, "f16", epilogue)
    config = _config(
        tile_sizes=(bm, bn),
        reduction_tile_sizes=(bk,),
        stages=draw(st.integers(1, 3)),
        stage_output=draw(st.booleans()),
        separate=draw(st.booleans()),
        splits=splits,
    )
    return spec, config


@settings(max_examples=max(3, settings().max_examples // 4))  # ~20 stages each
@given(wgmma_cases())
def test_the_wgmma_pipeline_keeps_the_result(case):
    spec, config = case
    module = build(spec)
    Pipeline(_passes(config)).run(module, check=True)
    text = str(module)
    assert "nvvm.wgmma.mma_async" in text and "nvvm.mma.sync" not in text


def test_a_1x1_convolution_through_its_flattened_pixels():
    from affinec.driver.compiler import compile_to_ptx

    spec = ConvSpec(2, 32, 6, 6, 40, 1, 1, layout="nhwc", filter_layout="rsck",
                    dtype="f16", epilogue="bias-relu")  # fmt: skip
    config = _config(
        tile_sizes=(64, 40), reduction_tile_sizes=(16,), flatten_pixels=True
    )
    compiled = compile_to_ptx(spec, config, arch="sm_90a", check=True)
    assert "wgmma.mma_async.sync.aligned.m64n40k16.f32.f16.f16" in compiled.ptx


def test_bf16_operands_with_an_epilogue():
    from affinec.driver.compiler import compile_to_ptx

    spec = MatmulSpec(128, 64, 64, "bf16", "bias-relu")
    config = _config(stage_output=True)
    compiled = compile_to_ptx(spec, config, arch="sm_90a", check=True)
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in compiled.ptx


def test_only_the_tensor_core_pass_changes():
    config = _config()
    wgmma = [p.name for p in map_to_gpu_passes(config)]
    mma = [p.name for p in map_to_gpu_passes(replace(config, tensor_core="mma.sync"))]
    assert [n for n in wgmma if n != "affinec-wgmma"] == [
        n for n in mma if n != "affinec-mma-sync"
    ]
    # with TMA's loads (asked for), affinec-tma-copies right after it
    tma = [p.name for p in map_to_gpu_passes(replace(config, tma=True))]
    at = tma.index("affinec-wgmma")
    assert tma[at + 1] == "affinec-tma-copies"
    assert tma[: at + 1] + tma[at + 2 :] == wgmma
    assert any(isinstance(p, AffinecWgmma) for p in map_to_gpu_passes(config))
    assert any(
        isinstance(p, AffinecMmaSync) for p in map_to_gpu_passes(KernelConfig(mma=True))
    )
    assert AffinecWgmma().changes_rounding


# -- negative controls --------------------------------------------------------------


def _lowered(spec, config, planner=None):
    """The module through the whole pipeline (another planner in its place, if
    given) and the pitches of its tiles' core matrices as the planner chose."""
    passes = _passes(config)
    at = [p.name for p in passes].index("affinec-plan-shared-memory")
    if planner is not None:
        passes[at] = planner
    module = build(spec)
    Pipeline(passes[: at + 1]).run(module)
    pitches = {name: _pitch(module, f"{name}_shared") for name in ("A", "B")}
    Pipeline(passes[at + 1 :]).run(module)
    return module, pitches


def _pitch(module, name: str) -> int:
    """The pitch of the core matrices of the interleaved tile called `name` (an
    allocation, or a launch's workgroup buffer)."""
    for op in module.walk():
        args = [a for r in op.regions for b in r.blocks for a in b.args]
        for value in (*op.results, *args):
            if value.name_hint == name and isinstance(value.type, MemRefType):
                return value.type.get_shape()[-2]
    raise AssertionError(f"no %{name}")


@pytest.mark.parametrize("operand", ["A", "B"])
def test_a_wrong_descriptor_field_gives_a_wrong_answer(operand):
    spec = MatmulSpec(64, 64, 64, "f16")
    config = _config()
    module, pitches = _lowered(spec, config)
    checker = Checker(spec)
    assert checker.check("lowered", module).ok
    # A is 64x32 K-major, B 32x64 MN-major (config's tiles): swap LBO and SBO.
    rows, cols, k_major = (64, 32, True) if operand == "A" else (32, 64, False)
    pitch = pitches[operand]
    fields, _ = wgmma_fields(rows, cols, k_major, pitch)
    swapped = MatrixDescriptor(0, fields.stride, fields.leading, 0)
    assert set_i64_constant(module, fields.encode(), swapped.encode()) == 1
    result = checker.check("swapped", module)
    assert not result.ok, result.row()


def test_the_planner_pads_core_matrices_where_the_bank_model_gains():
    from affinec.passes.affinec_plan_shared_memory import AffinecPlanSharedMemory

    spec = MatmulSpec(64, 64, 64, "f16")
    packed, pitches = _lowered(spec, _config(), AffinecPlanSharedMemory(pad=False))
    assert pitches == {"A": 8, "B": 8}
    padded, pitches = _lowered(spec, _config())
    # 16-byte copies along a row land one per core matrix: packed, 128 bytes apart,
    # all on the same four banks; padded they spread
    assert pitches["A"] > 8 and pitches["B"] > 8
    checker = Checker(spec)
    assert checker.check("packed", packed).ok and checker.check("padded", padded).ok


def test_a_wrong_step_along_k_gives_a_wrong_answer():
    spec = MatmulSpec(64, 64, 64, "f16")
    module, pitches = _lowered(spec, _config())
    checker = Checker(spec)
    # B's start moves by 2 x LBO bytes a step of 16: by one LBO instead.
    pitch = pitches["B"]
    step = wgmma_fields(32, 64, False, pitch)[1] >> 4
    assert set_i64_constant(module, step, step // 2) >= 1
    assert not checker.check("short step", module).ok


def test_a_copy_into_the_wrong_core_matrix_row_gives_a_wrong_answer():
    from affinec.dialects import nvgpu

    spec = MatmulSpec(64, 64, 64, "f16")
    config = _config(stages=1)
    module = build(spec)
    passes = _passes(config)
    at = [p.name for p in passes].index("affinec-plan-shared-memory") + 1
    Pipeline(passes[:at]).run(module)
    checker = Checker(spec)
    assert checker.check("planned", module).ok
    # One copy into A's tile writes rows r mod 8 and (r + 1) mod 8 swapped: the
    # planner's layout no longer what the descriptors read.
    copy = next(
        o
        for o in module.walk()
        if isinstance(o, nvgpu.DeviceAsyncCopyOp) and o.dst.name_hint == "A_shared"
    )
    from xdsl.ir.affine import AffineExpr, AffineMap

    from affinec.dialects import affine

    index = copy.dstIndices[-2]
    d = AffineExpr.dimension(0)
    moved = affine.ApplyOp([index], AffineMap(1, 0, ((d + 1) % 8,)))
    copy.parent_block().insert_op_before(moved, copy)
    copy.operands = [
        moved.result if v is index and k == len(copy.dstIndices) - 1 else v
        for k, v in enumerate(copy.operands)
    ]
    assert not checker.check("moved rows", module).ok


# -- PTX ----------------------------------------------------------------------------


def test_the_ptx_assembles_for_sm_90a_without_spills():
    from affinec.backend.ptxas import assemble, find_ptxas
    from affinec.driver.compiler import compile_to_ptx

    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    spec = MatmulSpec(4096, 4096, 1024, "f16")
    config = _config(
        tile_sizes=(128, 128), reduction_tile_sizes=(64,), stages=3, stage_output=True
    )
    ptx = compile_to_ptx(spec, config, arch="sm_90a").ptx
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert "fence.proxy.async.shared::cta" in ptx
    (resources,) = assemble(ptx, "sm_90a").values()
    assert resources.spill_stores == resources.spill_loads == 0
    assert resources.stack_frame == 0
    assert not resources.advisories  # no wgmma serialized


# -- refusals -----------------------------------------------------------------------


def _refused(spec, config, target=TARGET) -> str:
    module = build(spec)
    with pytest.raises(PassError) as e:
        Pipeline(_passes(config, target)).run(module)
    text = str(e.value)
    assert "\n" not in text.strip() or text.count("error") <= 1
    return text


@pytest.mark.parametrize(
    ("spec", "knobs", "target", "message"),
    [
        (MatmulSpec(64, 64, 64, "f16"), {}, "nvvm-attach-target{chip=sm_80}",
         "wgmma needs sm_90a; the module is compiled for sm_80"),
        (MatmulSpec(64, 64, 64, "f16"), {}, "nvvm-attach-target{chip=sm_90}",
         "wgmma needs sm_90a; the module is compiled for sm_90"),
        (MatmulSpec(64, 64, 64, "f16"), {"reduction_tile_sizes": (8,)}, TARGET,
         "not a multiple of 16"),
        (MatmulSpec(64, 64, 64, "f16"), {"reduction_tile_sizes": (24,)}, TARGET,
         "the reduction step is K = 24, not a multiple of 16"),
        (MatmulSpec(64, 64, 64, "f16"), {"tile_sizes": (32, 64)}, TARGET,
         "M = 32 rows: wgmma needs a multiple of 64"),
        (MatmulSpec(64, 64, 64, "f32"), {}, TARGET,
         "wgmma takes f16 or bf16 operands, this tile holds f32"),
        (ConvSpec(1, 16, 4, 64, 16, 3, 3, padding=1, layout="nhwc",
                  filter_layout="kcrs", dtype="f16"),
         {"tile_sizes": (1, 1, 64, 16), "reduction_tile_sizes": (3, 3, 16),
          "reassociate": True}, TARGET,
         "wgmma with A from registers reads the filter as K x N tiles"),
    ],
)  # fmt: skip
def test_bad_inputs_are_refused_located(spec, knobs, target, message):
    text = _refused(spec, _config(**knobs), target)
    assert message in text


def test_the_knob_is_checked():
    with pytest.raises(ValueError, match="tensor-core takes mma.sync or wgmma"):
        KernelConfig(mma=True, tensor_core="hmma")
    with pytest.raises(ValueError, match="needs mma"):
        KernelConfig(tensor_core="wgmma")
    with pytest.raises(ValueError, match="not with tf32"):
        KernelConfig(mma=True, tensor_core="wgmma", tf32=True)


def test_the_lowering_refuses_tiles_not_laid_out_for_wgmma():
    spec = MatmulSpec(64, 64, 64, "f16")
    module = build(spec)
    passes = _passes(_config())
    names = [p.name for p in passes]
    # the pipeline without the planner: the tiles stay as the copies wrote them
    kept = [p for p in passes if p.name != "affinec-plan-shared-memory"]
    assert len(kept) == len(names) - 1
    ctx = make_context()
    with pytest.raises(PassError, match="not laid out for wgmma"):
        for p in kept:
            p.apply(ctx, module)


# -- B read K-major -----------------------------------------------------------------

TRANSPOSED_B = """#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d1, d2)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @f(%x: memref<128x64xf16>, %w: memref<64x64xf16>, %y: memref<128x64xf16>) {
  %zero = arith.constant 0.0 : f16
  linalg.fill ins(%zero : f16) outs(%y : memref<128x64xf16>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : memref<128x64xf16>, memref<64x64xf16>) outs(%y : memref<128x64xf16>) {
  ^bb0(%p: f16, %q: f16, %acc: f16):
    %m = arith.mulf %p, %q : f16
    %s = arith.addf %acc, %m : f16
    linalg.yield %s : f16
  }
  func.return
}
"""


def test_a_b_tile_copied_n_by_k_is_read_k_major():
    # y = x @ w^T: the promotion copies w's tile as N x K (channels innermost), and
    # the step reads it as wgmma's K-major B (no transpose) instead of copying again
    import numpy as np

    from affinec.base.locating_parser import parse_module
    from affinec.interpreter import Interpreter

    module = parse_module(make_context(), TRANSPOSED_B, "transposed_b.mlir")
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (128, 64)).astype(np.float16)
    w = rng.uniform(-1, 1, (64, 64)).astype(np.float16)
    reference = x.astype(np.float64) @ w.astype(np.float64).T
    passes = [*Pipeline.parse("affinec-lower-linalg").passes, *_passes(_config())]
    at = [p.name for p in passes].index("affinec-wgmma") + 1
    for stage in (passes[:at], passes[at:]):
        Pipeline(stage).run(module)
        y = np.full((128, 64), np.nan, np.float16)
        Interpreter(module).run("f", x, w, y)
        error = np.linalg.norm(y - reference) / np.linalg.norm(reference)
        assert error < 1e-3
    text = str(module)
    assert "B[<f16>, <one>, <col>]" in text and "B[<f16>, <one>, <row>]" not in text


def test_padding_that_does_not_fit_leaves_the_core_matrices_packed():
    # 6 stages of 128x48 and 48x256 tiles: 221,184 bytes packed, and the staged
    # output (67,584 bytes) on their dead bytes, fit the 232,448 of sm_90a; B's
    # core matrices 9 rows apart (B alone: 239,616 bytes) would not

    spec = MatmulSpec(128, 256, 480, "f16")
    config = _config(tile_sizes=(128, 256), reduction_tile_sizes=(48,), stages=6,
                     stage_output=True)  # fmt: skip
    passes = _passes(config)
    at = [p.name for p in passes].index("affinec-convert-parallel-to-gpu")
    module = build(spec)
    Pipeline(passes[: at + 1]).run(module)
    assert _pitch(module, "A_shared") == _pitch(module, "B_shared") == 8
    # with fewer stages the padding fits, and the bank model wants it for B
    fewer = build(spec)
    Pipeline(_passes(replace(config, stages=4))[: at + 1]).run(fewer)
    assert _pitch(fewer, "B_shared") > 8


def test_the_command_line_takes_the_tensor_core_knob(tmp_path, capsys):
    from affinec.tools.cli import main as affinec

    out = tmp_path / "k.ptx"
    args = ["compile", "matmul", "--m", "256", "--n", "128", "--k", "128",
            "--dtype", "f16", "--arch", "sm_90a", "--mma", "--tensor-core", "wgmma",
            "--tile-sizes", "128,128", "--reduction-tile-sizes", "64",
            "--stages", "2", "-o", str(out)]  # fmt: skip
    assert affinec(args) == 0, capsys.readouterr().err
    assert "wgmma.mma_async.sync.aligned.m64n128k16" in out.read_text()
    bad = [*args[:-2], "--arch", "sm_80"]
    assert affinec(bad) != 0
    assert "wgmma needs sm_90a" in capsys.readouterr().err


def test_the_tensor_core_knob_alone_takes_config_for_s_tiles(tmp_path, capsys):
    from affinec.tools.cli import main as affinec

    out = tmp_path / "k.ptx"
    args = ["compile", "matmul", "--m", "256", "--n", "128", "--k", "128",
            "--arch", "sm_90a", "--tensor-core", "wgmma", "-o", str(out)]  # fmt: skip
    assert affinec([*args, "--dtype", "f16"]) == 0, capsys.readouterr().err
    assert "wgmma.mma_async" in out.read_text()
    assert affinec([*args, "--dtype", "f32"]) != 0
    assert "config_for puts this f32 spec on the SIMT route" in capsys.readouterr().err


def test_the_tuner_s_space_on_sm_90a_has_the_pass_s_configurations():
    from affinec.driver.compiler import compile_to_ptx
    from affinec.tuning.differential import Pair
    from affinec.tuning.space import search_space

    spec = MatmulSpec(64, 32, 32, dtype="f16")
    found = [c for c in search_space(spec, arch="sm_90a").configs if c.mma and c.tensor_core == "wgmma"]  # fmt: skip
    assert found and all(c.tile_sizes[0] % 64 == 0 for c in found)
    assert {Pair(spec, c).route() for c in found} == {"wgmma-pass"}
    assert not [
        c for c in search_space(spec, arch="sm_90").configs if c.tensor_core == "wgmma"
    ]
    assert (
        "wgmma.mma_async"
        in compile_to_ptx(spec, found[0], arch="sm_90a", check=True).ptx
    )
