"""From the llvm level to PTX: every PTX a test emits is assembled by ptxas for sm_80
and sm_90 (a ptxas error fails the test with ptxas's message), the PTX ISA version
stays at 8.x, and the compiler's API, launch record and resource report hold up."""

import io
import os
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from affinec.backend.emitter import EmitterError, check_ptx_version, to_llvm_ir, to_ptx
from affinec.backend.ptxas import PtxasError, assemble, find_ptxas, parse_verbose
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec, MatmulSpec, OuterSpec
from affinec.driver.compiler import CompiledKernel, compile_to_ptx
from affinec.driver.pipeline import Pipeline
from affinec.frontend.contraction import contraction_of
from affinec.ir.context import make_context
from affinec.tools.opt import main as opt_main
from strategies import specs

INPUTS = Path(__file__).parent / "filecheck" / "lowering" / "inputs"

# Every PTX the tests emit must pass ptxas: a machine without it (the development
# machines and CI have it in /usr/local/cuda/bin) fails these tests, unless told to
# skip them with AFFINEC_ALLOW_NO_PTXAS=1.
pytestmark = pytest.mark.skipif(
    find_ptxas() is None and os.environ.get("AFFINEC_ALLOW_NO_PTXAS") == "1",
    reason="ptxas not found and AFFINEC_ALLOW_NO_PTXAS=1",
)

ARCHS = ("sm_80", "sm_90")


def assemble_everywhere(ptx: str, kernel: str) -> None:
    """ptxas accepts `ptx` for every architecture it can run on (sm_80 PTX on sm_80
    and sm_90, sm_90 PTX on sm_90) and reports `kernel`."""
    assert check_ptx_version(ptx)[0] <= 8
    target = re.search(r"^\.target (sm_\d+)", ptx, re.MULTILINE)
    assert target is not None
    for arch in ARCHS[ARCHS.index(target[1]) :]:
        try:
            resources = assemble(ptx, arch)
        except PtxasError as e:
            pytest.fail(str(e))
        assert kernel in resources


FEATURES = [
    ConvSpec(1, 3, 7, 7, 4, 3, 3, padding=1),
    ConvSpec(2, 4, 9, 8, 5, 3, 2, stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
    ConvSpec(1, 3, 6, 6, 4, 3, 3, layout="nhwc", filter_layout="rsck", dtype="f16"),
    ConvSpec(1, 2, 5, 5, 3, 1, 1, dtype="f16", epilogue="relu"),
    ConvSpec(2, 3, 6, 6, 4, 3, 3, padding=2, epilogue="bias-relu", dtype="f16"),
    ConvSpec(1, 2, 6, 6, 3, 3, 3, layout="nhwc", epilogue="bias-relu"),
    MatmulSpec(9, 7, 5, epilogue="relu"),
    MatmulSpec(8, 8, 8, dtype="f16", epilogue="bias-relu"),
    OuterSpec(5, 7, dtype="f16"),
    ConvSpec(1, 3, 6, 6, 4, 3, 3, layout="nhwc", filter_layout="rsck", dtype="bf16"),
    ConvSpec(2, 3, 6, 6, 4, 3, 3, padding=2, epilogue="bias-relu", dtype="bf16"),
    MatmulSpec(8, 8, 8, dtype="bf16", epilogue="bias-relu"),
    OuterSpec(5, 7, dtype="bf16"),
]

ANCHORS = [  # the benchmark convolutions, fp16 in, f32 accumulation
    ConvSpec(128, 4, 224, 224, 64, 7, 7, stride=2, padding=3, dtype="f16"),
    ConvSpec(32, 64, 224, 224, 64, 3, 3, padding=1, dtype="f16", epilogue="relu"),
    ConvSpec(256, 256, 14, 14, 512, 3, 3, padding=1, dtype="f16"),
    ConvSpec(32, 128, 28, 28, 128, 3, 3, padding=1, layout="nhwc", dtype="f16"),
    ConvSpec(
        32, 256, 56, 56, 64, 1, 1, layout="nhwc", filter_layout="rsck", dtype="f16"
    ),
]


@pytest.mark.parametrize("spec", FEATURES, ids=lambda s: s.to_text())
def test_every_feature_compiles_and_assembles(spec):
    compiled = compile_to_ptx(spec)
    assert compiled.name == f"{contraction_of(spec).name}_kernel"
    assert f".entry {compiled.name}(" in compiled.ptx
    assert ".target sm_80" in compiled.ptx
    assemble_everywhere(compiled.ptx, compiled.name)


@pytest.mark.parametrize("spec", ANCHORS, ids=lambda s: s.describe())
def test_full_size_convolutions_compile_and_assemble(spec):
    compiled = compile_to_ptx(spec)
    assemble_everywhere(compiled.ptx, compiled.name)
    resources = compiled.resources()
    assert resources.spill_stores == 0 and resources.stack_frame == 0


@given(specs())
def test_the_default_pipeline_compiles_any_spec(spec):
    compiled = compile_to_ptx(spec)
    assemble_everywhere(compiled.ptx, compiled.name)


@st.composite
def compile_cases(draw):
    spec = draw(specs())
    extents = [e for _, e in contraction_of(spec).output_index]
    sizes = [draw(st.integers(1, e)) for e in extents]
    return (
        spec,
        sizes,
        draw(st.booleans()),
        draw(st.sampled_from([0, 7, 64, 1024])),
        draw(st.sampled_from([32, 64])),
        draw(st.sampled_from(ARCHS)),
    )


@given(compile_cases())
def test_random_specs_and_options_assemble(case):
    spec, sizes, separate, threads, bits, arch = case
    compiled = compile_to_ptx(
        spec,
        arch=arch,
        tile_sizes=sizes,
        separate=separate,
        threads_per_block=threads,
        index_bitwidth=bits,
    )
    assert f".target {arch}" in compiled.ptx
    assemble_everywhere(compiled.ptx, compiled.name)


def test_the_compiled_kernel():
    spec = ConvSpec(1, 2, 6, 6, 3, 3, 3, padding=1, dtype="f16", epilogue="bias-relu")
    compiled = compile_to_ptx(spec, arch="sm_90", tile_sizes=[1, 3, 2, 6])
    assert isinstance(compiled, CompiledKernel)
    launch = compiled.launch
    assert launch.kernel == compiled.name == "conv_kernel"
    assert launch.grid == (3, 1, 1) and launch.block == (36, 1, 1)
    assert [a.name for a in launch.arguments] == ["input", "filter", "bias", "output"]
    assert [a.dtype for a in launch.arguments] == [np.dtype(np.float16)] * 4
    assert launch.outputs == ("output",)
    assert compiled.spec == spec
    assert "use-bare-ptr-memref-call-conv=true" in compiled.pipeline
    assert {name for name, _ in compiled.timings} >= {"lower-affine", "llvm-ir + ptx"}
    resources = compiled.resources()
    assert resources.arch == "sm_90" and resources.registers > 0
    assert resources.spill_stores == 0 and resources.stack_frame == 0
    # The runtime takes it as it is, and checks arguments without a GPU.
    kernel = compiled.runtime_kernel()
    assert kernel.grid == launch.grid and kernel.block == launch.block
    assert [p.output for p in kernel.parameters] == [False, False, False, True]
    with pytest.raises(TypeError, match="argument 'filter'"):
        kernel.check(np.zeros((1, 2, 6, 6), np.float16), np.zeros((3, 2, 3, 3)))


def test_private_buffers_end_in_registers():
    # 4 turns per thread over a 1x4x4x4 block tile with 16 threads: the per-thread
    # accumulators are indexed by the unrolled turn, so SROA promotes them.
    spec = ConvSpec(1, 4, 8, 8, 8, 3, 3, padding=1)
    compiled = compile_to_ptx(spec, tile_sizes=[1, 4, 4, 4], threads_per_block=16)
    assert "!llvm.loop" in compiled.llvm_ir
    assert "llvm.loop.unroll.full" in compiled.llvm_ir
    for arch in ARCHS:
        r = compiled.resources(arch)
        assert r.stack_frame == 0 and r.local_memory == 0 and r.spill_stores == 0
    assert ".local" not in compiled.ptx


def test_shared_memory_and_barriers_reach_the_ptx():
    module = parse_module(make_context(), (INPUTS / "matmul_shared.mlir").read_text())
    Pipeline.parse(
        "affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=4},affinec-convert-parallel-to-gpu,affinec-lower-to-nvvm"
    ).run(module)
    ir = to_llvm_ir(module)
    assert "addrspace(3) global [12 x float] undef, align 16" in ir
    assert re.search(r"getelementptr inbounds \[12 x float\], .*addrspace\(3\)", ir)
    ptx = to_ptx(module, "sm_90")
    assert ".shared .align 16 .b8" in ptx
    assert ptx.count("bar.sync") >= 2  # LLVM may unroll the loop around them
    assemble_everywhere(ptx, "matmul_kernel")
    assert assemble(ptx, "sm_90")["matmul_kernel"].shared_memory == 48


def test_affinec_opt_prints_ptx_and_llvm_ir(tmp_path):
    source = tmp_path / "conv.mlir"
    from affinec.frontend.naive import build

    source.write_text(str(build(ConvSpec(1, 2, 5, 5, 2, 3, 3, padding=1))))
    for target, marker in (
        ("ptx", ".version 8.0"),
        ("ptx{arch=sm_90}", ".target sm_90"),
        ("llvm", "define external ptx_kernel void @"),
    ):
        out = io.StringIO()
        with redirect_stdout(out):
            assert opt_main([str(source), "-p", "affinec-default", "-t", target]) == 0
        assert marker in out.getvalue()
    assemble_everywhere(
        out.getvalue().split("\n", 1)[0] and _ptx_of(source), "conv_kernel"
    )


def _ptx_of(source: Path) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        opt_main([str(source), "-p", "affinec-default", "-t", "ptx"])
    return out.getvalue()


def test_a_module_not_lowered_is_a_located_error(tmp_path):
    source = tmp_path / "conv.mlir"
    from affinec.frontend.naive import build

    source.write_text(str(build(ConvSpec(1, 2, 5, 5, 2, 3, 3))))
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        assert (
            opt_main([str(source), "-p", "affinec-tile-split-sink", "-t", "ptx"]) == 1
        )
    assert "error: 'builtin.module' op the module has no gpu.module" in err.getvalue()
    module = build(ConvSpec(1, 2, 5, 5, 2, 3, 3))
    Pipeline.parse(
        "affinec-tile-split-sink,affinec-map-to-gpu,gpu-kernel-outlining"
    ).run(module)
    with pytest.raises(EmitterError, match="'gpu.func' is not at the llvm level"):
        to_ptx(module)
    Pipeline.parse(
        "lower-affine,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}"
    ).run(module)
    with pytest.raises(EmitterError, match="unknown GPU architecture 'sm_70'"):
        to_ptx(module, "sm_70")


def test_ptxas_errors_carry_ptxas_message():
    with pytest.raises(PtxasError, match=r"ptxas -arch=sm_80 refused the PTX: .*error"):
        assemble(
            ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() { bogus; }\n"
        )


def test_newer_ptx_versions_are_refused():
    assert check_ptx_version(".version 8.7\n") == (8, 7)
    with pytest.raises(EmitterError, match="PTX ISA 9.0 is newer"):
        check_ptx_version("//\n.version 9.0\n.target sm_90\n")


def test_parsing_ptxas_verbose_output():
    text = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Function properties for k
    24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 64 registers, used 1 barriers, 4096 bytes smem, 8+4 bytes lmem, 376 bytes cmem[0]
"""
    r = parse_verbose(text, "sm_80")["k"]
    assert (r.registers, r.shared_memory, r.stack_frame) == (64, 4096, 24)
    assert (r.spill_stores, r.spill_loads, r.local_memory, r.barriers) == (8, 12, 12, 1)
    assert r.constant_memory == 376


def test_ptxas_s_notes_of_what_it_did_at_a_cost_are_kept_once_each():
    """What ptxas 13.0 printed for a Hopper kernel whose wgmmas were written with
    copies between them (LLVM's coalescing off): inserted waits, one a wgmma, and
    the serialization they cost."""
    text = (
        "".join(
            f"ptxas info    : (C7519) warpgroup.arrive is injected in around line "
            f"{line} by compiler to allow use of registers in GMMA in function "
            "'conv_kernel'\n"
            for line in (238, 312, 386)
        )
        + "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async "
        "instructions are serialized due to insufficient register resources for "
        "the wgmma pipeline in the function 'conv_kernel'\n"
        "ptxas info    : Compiling entry function 'conv_kernel' for 'sm_90a'\n"
        "ptxas info    : Used 212 registers, used 1 barriers\n"
        "ptxas info    : Compiling entry function 'other' for 'sm_90a'\n"
        "ptxas info    : Used 40 registers\n"
    )
    found = parse_verbose(text, "sm_90a")
    assert found["conv_kernel"].advisories == (
        "C7519 warpgroup.arrive is injected by compiler to allow use of registers "
        "in GMMA (3 times)",
        "C7511 Potential Performance Loss: wgmma.mma_async instructions are "
        "serialized due to insufficient register resources for the wgmma pipeline",
    )
    assert "; ptxas: C7511 Potential" in found["conv_kernel"].describe()
    assert found["other"].advisories == ()


@pytest.mark.parametrize(
    "spec",
    [
        ConvSpec(1, 3, 6, 6, 2, 3, 3, stride=2, padding=1, dilation=(2, 1)),
        ConvSpec(2, 2, 5, 4, 3, 1, 2, layout="nhwc", dtype="f16", epilogue="bias-relu"),
    ],
    ids=["f32", "f16"],
)
def test_the_compile_command(spec, tmp_path):
    from affinec.tools.cli import main

    flags = spec.to_text().split()[1:]
    argv = ["compile", "conv"]
    for f in flags:
        key, value = f.split("=")
        argv += [f"--{key}", value]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert main([*argv, "--resources"]) == 0
    assert ".target sm_80" in out.getvalue()
    assert "conv_kernel (sm_80): " in err.getvalue()
    assert "conv_kernel (sm_90): " in err.getvalue()
    ptx = tmp_path / "conv.ptx"
    args = [*argv, "--arch", "sm_90", "--tile-sizes", "1,2", "-o", str(ptx)]
    with redirect_stdout(out), redirect_stderr(err):
        assert main(args) == 0
    assert ".target sm_90" in ptx.read_text()
    assemble_everywhere(ptx.read_text(), "conv_kernel")


def test_the_compiler_verifies_once_unless_asked_for_each_pass():
    spec = ConvSpec(1, 2, 6, 6, 3, 3, 3, padding=1)
    once = compile_to_ptx(spec, verify_each=False)
    assert [name for name, _ in once.timings].count("verify") == 1
    each = compile_to_ptx(spec, verify_each=True)
    assert "verify" not in [name for name, _ in each.timings]
    assert once.ptx == each.ptx


BY_VALUE = (
    Path(__file__).parent / "filecheck/lowering/by_value_parameter_and_inline_asm.mlir"
)


def test_a_by_value_parameter_and_inline_asm_assemble_and_refuse_interpretation():
    # The 128-byte grid-constant parameter stays in the parameter space (no local
    # copy: ptxas reports no stack), the inline PTX is assembled as written, and
    # the interpreter, which cannot run PTX text, says so at the op.
    from affinec.base.diagnostics import format_exception
    from affinec.interpreter import Interpreter, InterpreterError

    module = parse_module(make_context(), BY_VALUE.read_text(), str(BY_VALUE))
    with pytest.raises(InterpreterError) as info:
        Interpreter(module).run("k", np.zeros(128, np.float32), None)
    message = format_exception(info.value)
    assert "by_value_parameter_and_inline_asm.mlir:18:" in message
    assert "llvm.inline_asm" in message and "does not implement this op" in message
    Pipeline.parse("convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}").run(
        module
    )
    for arch in ARCHS:
        ptx = to_ptx(module, arch)
        assert ".param .align 64 .b8 k_param_1[128]" in ptx
        assemble_everywhere(ptx, "k")
        assert assemble(ptx, arch)["k"].stack_frame == 0


def test_grid_constant_is_refused_on_a_gpu_func_as_mlir_refuses_it():
    from affinec.base.diagnostics import VerificationError, verify

    text = BY_VALUE.read_text().replace(
        "llvm.byval = !llvm.array<128 x i8>}",
        "llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}",
    )
    with pytest.raises(
        VerificationError, match="'nvvm.grid_constant' belongs on an llvm.func"
    ):
        verify(parse_module(make_context(), text, "k.mlir"))


GEP_MARKS_ONE_VALUE_AND_HAS_NONE = """
builtin.module attributes {gpu.container_module} {
  gpu.module @k {
    llvm.func @f(%p: !llvm.ptr) attributes {nvvm.kernel} {
      %q = "llvm.getelementptr"(%p) <{elem_type = f32, noWrapFlags = 0 : i32,
        rawConstantIndices = array<i32: -2147483648>}> : (!llvm.ptr) -> !llvm.ptr
      llvm.return
    }
  }
}
"""


def test_a_getelementptr_without_the_values_it_marks_is_refused_as_mlir_refuses_it():
    """-2**31 among the constant indices marks one given as a value; xDSL's verifier
    does not count them (the emitter failed on such a module), MLIR's does."""
    from affinec.base.diagnostics import VerificationError, verify

    message = "expected as many dynamic indices as specified in 'rawConstantIndices'"
    module = parse_module(make_context(), GEP_MARKS_ONE_VALUE_AND_HAS_NONE, "g.mlir")
    with pytest.raises(VerificationError, match=re.escape(message)):
        verify(module)
    from mlir_opt import MLIR_OPT, MlirOptError, mlir_opt

    if MLIR_OPT is not None:
        with pytest.raises(MlirOptError, match=re.escape(message)):
            mlir_opt(GEP_MARKS_ONE_VALUE_AND_HAS_NONE)


@pytest.mark.parametrize("index_bitwidth", [0, 32])
def test_an_access_beyond_a_32_bit_offset_is_lowered_with_its_offset_as_a_value(
    index_bitwidth,
):
    """A constant offset no 32-bit constant index holds (2**31 here, -2**31 being
    the mark of an index given as a value) goes into the `getelementptr` as a
    value: the module verifies and compiles (the fuzzer found the lowering had put
    2**31 among the constant indices, where it read as that mark)."""
    from xdsl.dialects import llvm

    from affinec.base.diagnostics import verify

    text = """
builtin.module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f(%a: memref<1xf32>) kernel {
      %zero = arith.constant 0.0 : f32
      %far = arith.constant 2147483648 : index
      memref.store %zero, %a[%far] : memref<1xf32>
      gpu.return
    }
  }
}
"""
    module = parse_module(make_context(), text, "far.mlir")
    Pipeline.parse(
        f"convert-gpu-to-nvvm{{index-bitwidth={index_bitwidth} "
        "use-bare-ptr-memref-call-conv=true}"
    ).run(module)
    verify(module)
    geps = [op for op in module.walk() if isinstance(op, llvm.GEPOp)]
    assert geps and all(
        list(g.rawConstantIndices.iter_values()) == [llvm.GEP_USE_SSA_VAL]
        and len(g.ssa_indices) == 1
        for g in geps
    )
    assert ".entry" in to_ptx(module, "sm_80")
