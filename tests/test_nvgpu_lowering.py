"""`convert-nvgpu-to-nvvm`, then the existing lowering, on the hand-written MMA kernels:
the IR between the passes and at the llvm + nvvm level computes what the gpu level
computed (bit for bit: the interpreter's MMA is deterministic), a wrong layout fails
at every level, and the PTX has `mma.sync`, `ldmatrix` and `cp.async` and passes
ptxas for sm_80 and sm_90."""

import numpy as np
import pytest
from mma_kernels import MmaKernel

from affinec.context import make_context
from affinec.diagnostics import PassError, parse_module, verify
from affinec.emitter import to_ptx
from affinec.interpreter import Interpreter
from affinec.interpreter.gpu_ops import DataRaceError
from affinec.pipeline import Pipeline
from affinec.ptxas import PtxasError, assemble

TO_NVVM = "convert-nvgpu-to-nvvm"
TO_LLVM = "convert-scf-to-cf,convert-gpu-to-nvvm"


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
