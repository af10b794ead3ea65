"""The SASS of compiled kernels (`affinec.backend.sass`, cuobjdump and nvdisasm from
NVIDIA's wheels where CUDA has only ptxas): what ptxas made of the PTX, compared
instruction for instruction without a GPU."""

from __future__ import annotations

import pytest
from test_hopper_lowering import _lowered

from affinec.backend import sass as sass_module
from affinec.backend.emitter import to_ptx
from affinec.backend.ptxas import find_ptxas
from affinec.backend.sass import SassUnavailable, sass, sass_available
from affinec.base.spec import ConvSpec
from affinec.dialects import nvvm
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.tools.hopper_matmul import matmul_module

needs_sass = pytest.mark.skipif(
    find_ptxas() is None or not sass_available(),
    reason="needs ptxas, cuobjdump and nvdisasm (make installs the last two)",
)


@needs_sass
def test_a_tensor_core_kernel_s_sass_has_its_mmas():
    spec = ConvSpec(
        1,
        16,
        8,
        8,
        16,
        3,
        3,
        padding=1,
        dtype="f16",
        layout="nhwc",
        filter_layout="rsck",
    )
    compiled = compile_to_ptx(spec, config_for(spec), arch="sm_80")
    instructions = sass(compiled.ptx, "sm_80")
    assert "EXIT" in instructions
    assert any(i.startswith("HMMA.16816.F32") for i in instructions)


@needs_sass
def test_a_run_of_wgmmas_as_one_statement_is_the_same_kernel(monkeypatch):
    """The emitter writes the MMAs of a K step, which accumulate into the same
    registers, as one inline PTX statement (to spare LLVM a quadratic coalescing):
    ptxas makes the same instructions of it as of one statement each."""
    module = _lowered(matmul_module(128, 64, 256, 3))
    grouped_ptx = to_ptx(module, "sm_90a")
    monkeypatch.setattr(nvvm, "accumulation_run", lambda op: [op])
    separate_ptx = to_ptx(module, "sm_90a")
    statements = (p.count("begin inline asm") for p in (grouped_ptx, separate_ptx))
    assert tuple(statements) == (12, 36)  # 8 runs of 4 MMAs; the 4 mbarrier waits
    grouped, separate = sass(grouped_ptx, "sm_90a"), sass(separate_ptx, "sm_90a")
    assert sum(i.startswith("HGMMA") for i in grouped) == 2 * 16  # 2 blocks x K/16
    assert grouped == separate


def test_without_the_tools_the_error_says_how_to_get_them(monkeypatch, tmp_path):
    monkeypatch.setattr(sass_module, "find_cuda_tool", lambda name: None)
    assert not sass_available()
    with pytest.raises(SassUnavailable, match="pip install nvidia-cuda-cuobjdump"):
        sass_module.disassemble(tmp_path / "kernel.cubin")
