"""`convert-nvgpu-to-nvvm`, then the existing lowering, on the hand-written MMA kernels:
the IR between the passes and at the llvm + nvvm level computes what the gpu level
computed (bit for bit: the interpreter's MMA is deterministic), a wrong layout fails
at every level, and the PTX has `mma.sync`, `ldmatrix` and `cp.async` and passes
ptxas for sm_80 and sm_90."""

import numpy as np
import pytest
from mma_kernels import MmaKernel

from affinec.backend.emitter import to_ptx
from affinec.backend.ptxas import PtxasError, assemble
from affinec.base.diagnostics import PassError, verify
from affinec.base.locating_parser import parse_module
from affinec.driver.pipeline import Pipeline
from affinec.interpreter import Interpreter
from affinec.interpreter.shared_memory import DataRaceError
from affinec.ir.context import make_context

TO_NVVM = "convert-nvgpu-to-nvvm"
TO_LLVM = "convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}"


def interpreted(kernel: MmaKernel, module) -> np.ndarray:
    a, b, c, d = kernel.inputs()
    Interpreter(module).run("mma", a, b, c, d)
    return d


def levels(kernel: MmaKernel, text: str | None = None):
    """D at the gpu level, after convert-nvgpu-to-nvvm and at the llvm level, and
    the module at the llvm level."""
    module = parse_module(make_context(), text or kernel.text())
    verify(module)
    results = [interpreted(kernel, module)]
    for passes in (TO_NVVM, TO_LLVM):
        Pipeline.parse(passes).run(module)
        results.append(interpreted(kernel, module))
    return results, module


def relative_error(kernel: MmaKernel, d: np.ndarray) -> float:
    a, b, c, _ = kernel.inputs()
    want = kernel.reference(a, b, c)
    return float(np.linalg.norm(d - want) / np.linalg.norm(want))


KERNELS = [
    MmaKernel(),
    MmaKernel(operands="bf16", b_k_contiguous=False, k_steps=2),
    MmaKernel(warps=2, async_copy=True, epilogue=True),
    MmaKernel(operands="tf32", k_steps=2),
]


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_every_level_computes_the_same_d(kernel):
    (gpu, nvvm, llvm), _ = levels(kernel)
    assert relative_error(kernel, gpu) < 1e-6
    np.testing.assert_array_equal(nvvm, gpu)
    np.testing.assert_array_equal(llvm, gpu)


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_the_ptx_uses_tensor_cores_and_passes_ptxas(kernel):
    _, module = levels(kernel)
    for arch in ("sm_80", "sm_90"):
        ptx = to_ptx(module, arch)
        # A misspelt intrinsic would be a call of an undefined function instead.
        assert "call" not in ptx
        shape = "m16n8k8" if kernel.operands == "tf32" else "m16n8k16"
        assert f"mma.sync.aligned.{shape}.row.col.f32.{kernel.operands}" in ptx
        if kernel.operands != "tf32":
            assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
            trans = "" if kernel.b_k_contiguous else ".trans"
            assert f"ldmatrix.sync.aligned.m8n8.x2{trans}.shared.b16" in ptx
        if kernel.async_copy:
            assert "cp.async.ca.shared.global" in ptx
            assert "cp.async.commit_group" in ptx and "cp.async.wait_group" in ptx
        try:
            resources = assemble(ptx, arch)
        except PtxasError as e:
            pytest.fail(str(e))
        assert resources["mma"].spill_stores == 0


def test_bypass_l1_and_zero_fill_lower_to_cg_with_a_source_size():
    kernel = MmaKernel(async_copy=True)
    text = kernel.text().replace(
        "%sa[%ar, %ac], 8 :", "%sa[%ar, %ac], 8, %c8 {bypassL1} :"
    )
    (gpu, nvvm, llvm), module = levels(kernel, text)
    np.testing.assert_array_equal(llvm, gpu)
    ptx = to_ptx(module)
    assert "cp.async.cg.shared.global" in ptx and "16, %r" in ptx
    assemble(ptx, "sm_80")


def test_swapped_lanes_fail_at_every_level():
    kernel = MmaKernel(swap_lanes=(3, 7))
    for d in levels(kernel)[0]:
        assert relative_error(kernel, d) > 0.05


def test_a_missing_wait_is_a_race_at_the_llvm_level_too():
    kernel = MmaKernel(async_copy=True)
    text = kernel.text().replace(
        "nvgpu.device_async_wait %grp {numGroups = 0 : i32}", ""
    )
    module = parse_module(make_context(), text)
    Pipeline.parse(f"{TO_NVVM},{TO_LLVM}").run(module)
    with pytest.raises(
        DataRaceError, match="asynchronous copy 'nvvm.cp.async.shared.global"
    ):
        interpreted(kernel, module)


def test_convert_gpu_to_nvvm_refuses_nvgpu_ops_naming_the_pass():
    module = parse_module(make_context(), MmaKernel().text())
    with pytest.raises(PassError, match="run convert-nvgpu-to-nvvm first"):
        Pipeline.parse(TO_LLVM).run(module)


def test_a_copy_token_used_elsewhere_is_refused_before_rewriting():
    # A copy's token waited on directly: a copy's token only joins a group.
    body = """
    gpu.func @k(%g: memref<8xf16>) workgroup(%s : memref<8xf16, 3>) kernel {
      %c0 = arith.constant 0 : index
      %t = nvgpu.device_async_copy %g[%c0], %s[%c0], 8 : memref<8xf16> to memref<8xf16, 3>
      nvgpu.device_async_wait %t
      gpu.return
    }
    """
    module = parse_module(
        make_context(),
        "builtin.module attributes {gpu.container_module} {\n"
        f"  gpu.module @k {{{body}}}\n}}",
    )
    before = str(module)
    with pytest.raises(PassError, match="uses the async token of"):
        Pipeline.parse(TO_NVVM).run(module)
    assert str(module) == before


MAPPED = """
func.func @mma(%a: memref<16x16xf16>, %b: memref<8x16xf16>, %d: memref<16x8xf32>) {
  affine.parallel (%bx) = (0) to (1) {
    %sa = memref.alloc() : memref<16x16xf16, 3>
    %sb = memref.alloc() : memref<8x16xf16, 3>
    affine.parallel (%t) = (0) to (32) {
      affine.for %j = 0 to 8 {
        %v = affine.load %a[%t floordiv 2, (%t mod 2) * 8 + %j] : memref<16x16xf16>
        affine.store %v, %sa[%t floordiv 2, (%t mod 2) * 8 + %j] : memref<16x16xf16, 3>
      }
      affine.for %j = 0 to 4 {
        %w = affine.load %b[%t floordiv 4, (%t mod 4) * 4 + %j] : memref<8x16xf16>
        affine.store %w, %sb[%t floordiv 4, (%t mod 4) * 4 + %j] : memref<8x16xf16, 3>
      }
    } {affinec.mapping = "thread"}
    gpu.barrier
    affine.parallel (%lane) = (0) to (32) {
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %arow = arith.remui %lane, %c16 : index
      %ah = arith.divui %lane, %c16 : index
      %acol = arith.muli %ah, %c8 : index
      %fa = nvgpu.ldmatrix %sa[%arow, %acol] {numTiles = 4 : i32, transpose = false} : memref<16x16xf16, 3> -> vector<4x2xf16>
      %bn = arith.remui %lane, %c8 : index
      %bq = arith.divui %lane, %c8 : index
      %bh = arith.remui %bq, %c2 : index
      %bk = arith.muli %bh, %c8 : index
      %fb = nvgpu.ldmatrix %sb[%bn, %bk] {numTiles = 2 : i32, transpose = false} : memref<8x16xf16, 3> -> vector<2x2xf16>
      %zero = arith.constant dense<0.0> : vector<2x2xf32>
      %fd = nvgpu.mma.sync (%fa, %fb, %zero) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
{stores}
    } {affinec.mapping = "thread"}
  } {affinec.mapping = "grid"}
  func.return
}
"""


def test_the_mapped_level_runs_warp_ops_through_the_existing_lowering():
    """A grid band with thread bands holding nvgpu ops (what the MMA pass will
    produce) is interpreted, and the existing passes carry it to PTX."""
    stores = "\n".join(
        f"      %x{r}{e} = vector.extract %fd[{r}, {e}] : f32 from vector<2x2xf32>\n"
        f"      affine.store %x{r}{e}, %d[%lane floordiv 4 + {8 * r}, "
        f"(%lane mod 4) * 2 + {e}] : memref<16x8xf32>"
        for r in range(2)
        for e in range(2)
    )
    module = parse_module(make_context(), MAPPED.replace("{stores}", stores))
    verify(module)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (16, 16)).astype(np.float16)
    b = rng.uniform(-1, 1, (8, 16)).astype(np.float16)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    for passes in (
        "",
        "affinec-convert-parallel-to-gpu,gpu-kernel-outlining,lower-affine",
        f"{TO_NVVM},{TO_LLVM}",
    ):
        if passes:
            Pipeline.parse(passes).run(module)
        d = np.full((16, 8), np.nan, np.float32)
        Interpreter(module).run("mma", a, b, d)
        np.testing.assert_allclose(d, want, rtol=1e-6, atol=1e-6)
    ptx = to_ptx(module)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assemble(ptx, "sm_90")


VECTORS = """
builtin.module attributes {gpu.container_module} {
  func.func @f(%x: memref<4xf32>, %out: memref<10x4xf32>, %i: index) {
    %one = arith.constant 1 : index
    gpu.launch_func @k::@k blocks in (%one, %one, %one) threads in (%one, %one, %one) args(%x : memref<4xf32>, %out : memref<10x4xf32>, %i : index)
    func.return
  }
  gpu.module @k {
    gpu.func @k(%x: memref<4xf32>, %out: memref<10x4xf32>, %i: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %x0 = memref.load %x[%c0] : memref<4xf32>
      %x1 = memref.load %x[%c1] : memref<4xf32>
      %x2 = memref.load %x[%c2] : memref<4xf32>
      %x3 = memref.load %x[%c3] : memref<4xf32>
      %p = ub.poison : vector<2x2xf32>
      %v1 = vector.insert %x0, %p[0, 0] : f32 into vector<2x2xf32>
      %v2 = vector.insert %x1, %v1[0, 1] : f32 into vector<2x2xf32>
      %row = vector.broadcast %x2 : f32 to vector<2xf32>
      %v3 = vector.insert %row, %v2[1] : vector<2xf32> into vector<2x2xf32>
      %v = vector.insert %x3, %v3[1, %i] : f32 into vector<2x2xf32>
      %k = arith.constant dense<[[1.5, -2.0], [0.25, 3.0]]> : vector<2x2xf32>
      %z = arith.constant dense<0.0> : vector<2x2xf32>
      %b = vector.broadcast %x3 : f32 to vector<2x2xf32>
      %add = arith.addf %v, %k : vector<2x2xf32>
      %sub = arith.subf %v, %b : vector<2x2xf32>
      %mul = arith.mulf %v, %k : vector<2x2xf32>
      %div = arith.divf %v, %k : vector<2x2xf32>
      %neg = arith.negf %v : vector<2x2xf32>
      %zer = arith.addf %z, %v : vector<2x2xf32>
      %h = arith.truncf %mul : vector<2x2xf32> to vector<2x2xf16>
      %back = arith.extf %h : vector<2x2xf16> to vector<2x2xf32>
      %ones = arith.constant dense<1.0> : vector<2xf32>
      %r1 = vector.extract %v[1] : vector<2xf32> from vector<2x2xf32>
      %row1 = arith.addf %r1, %ones : vector<2xf32>
      %lifted = vector.insert %row1, %z[0] : vector<2xf32> into vector<2x2xf32>
{stores}
      gpu.return
    }
  }
}
"""

RESULTS = ["v", "add", "sub", "mul", "div", "neg", "zer", "back", "lifted", "k"]


def test_vector_arithmetic_and_assembly_at_every_level():
    stores = "\n".join(
        f"      %e{n}{r}{c} = vector.extract %{name}[{r}, {c}] : f32 from "
        f"vector<2x2xf32>\n"
        f"      %s{n}{r}{c} = arith.constant {n} : index\n"
        f"      %t{n}{r}{c} = arith.constant {2 * r + c} : index\n"
        f"      memref.store %e{n}{r}{c}, %out[%s{n}{r}{c}, %t{n}{r}{c}] : "
        "memref<10x4xf32>"
        for n, name in enumerate(RESULTS)
        for r in range(2)
        for c in range(2)
    )
    module = parse_module(make_context(), VECTORS.replace("{stores}", stores))
    verify(module)
    x = np.array([1.0, -3.0, 0.5, 7.0], np.float32)
    v = np.array([[1.0, -3.0], [0.5, 7.0]], np.float32)  # %i = 1 puts x3 at [1, 1]
    k = np.array([[1.5, -2.0], [0.25, 3.0]], np.float32)
    want = [
        v,
        v + k,
        v - x[3],
        v * k,
        v / k,
        -v,
        v,
        (v * k).astype(np.float16).astype(np.float32),
        np.array([v[1] + 1, [0, 0]], np.float32),
        k,
    ]
    for passes in ("", TO_LLVM):
        if passes:
            Pipeline.parse(passes).run(module)
        out = np.full((10, 4), np.nan, np.float32)
        Interpreter(module).run("f", x, out, 1)
        np.testing.assert_array_equal(out, np.array(want).reshape(10, 4))
    assemble(to_ptx(module), "sm_80")
