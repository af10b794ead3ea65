"""The nvgpu dialect, the nvvm tensor-core and copy ops, `llvm.extractelement` and
`affinec.element_pointer`: every op prints, parses and prints again to the same text
(custom and generic form), and malformed ops fail verification at their line."""

import io
import re

import pytest
from xdsl.printer import Printer

from affinec.base.diagnostics import VerificationError, format_exception, verify
from affinec.base.locating_parser import parse_module
from affinec.dialects import nvgpu
from affinec.ir.context import make_context

NVGPU_OPS = """
func.func @f(%g: memref<64x64xf16>, %s: memref<16x40xf16, 3>, %sb: memref<16x40xbf16, 3>, %i: index, %v: index, %a: vector<4x2xf16>, %b: vector<2x2xf16>, %ab: vector<4x2xbf16>, %bb: vector<2x2xbf16>, %c: vector<2x2xf32>, %af: vector<4x1xf32>, %bf: vector<2x1xf32>, %gf: memref<32xf32>, %sf: memref<32xf32, 3>) {
  %x = nvgpu.ldmatrix %s[%i, %i] {numTiles = 4 : i32, transpose = false} : memref<16x40xf16, 3> -> vector<4x2xf16>
  %y = nvgpu.ldmatrix %sb[%i, %i] {numTiles = 2 : i32, transpose = true} : memref<16x40xbf16, 3> -> vector<2x2xbf16>
  %z = nvgpu.ldmatrix %s[%i, %i] {numTiles = 1 : i32, transpose = false} : memref<16x40xf16, 3> -> vector<1x2xf16>
  %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
  %e = nvgpu.mma.sync (%ab, %bb, %c) {mmaShape = [16, 8, 16]} : (vector<4x2xbf16>, vector<2x2xbf16>, vector<2x2xf32>) -> vector<2x2xf32>
  %h = nvgpu.mma.sync (%af, %bf, %c) {mmaShape = [16, 8, 8], tf32Enabled} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>
  %t = nvgpu.device_async_copy %g[%i, %i], %s[%i, %i], 8 : memref<64x64xf16> to memref<16x40xf16, 3>
  %t2 = nvgpu.device_async_copy %g[%i, %i], %s[%i, %i], 8, %v {bypassL1} : memref<64x64xf16> to memref<16x40xf16, 3>
  %t3 = nvgpu.device_async_copy %gf[%i], %sf[%i], 1 : memref<32xf32> to memref<32xf32, 3>
  %grp = nvgpu.device_async_create_group %t, %t2, %t3
  %none = nvgpu.device_async_create_group
  nvgpu.device_async_wait %grp {numGroups = 1 : i32}
  nvgpu.device_async_wait %none
  func.return
}
"""

NVVM_OPS = """
builtin.module {
  gpu.module @m {
    llvm.func @k(%p: !llvm.ptr<3>, %g: !llvm.ptr<1>, %a: vector<2xf16>, %i: i32, %c: f32) {
      %r = nvvm.ldmatrix %p {num = 4 : i32, layout = #nvvm.mma_layout<row>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
      %r1 = nvvm.ldmatrix %p {num = 1 : i32, layout = #nvvm.mma_layout<col>} : (!llvm.ptr<3>) -> i32
      %d = nvvm.mma.sync A[%a, %a, %a, %a] B[%a, %a] C[%c, %c, %c, %c] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
      %e = nvvm.mma.sync A[%i, %i, %i, %i] B[%i, %i] C[%c, %c, %c, %c] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
      %f = nvvm.mma.sync A[%i, %i, %i, %i] B[%i, %i] C[%c, %c, %c, %c] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<tf32>, multiplicandBPtxType = #nvvm.mma_type<tf32>, shape = #nvvm.shape<m = 16, n = 8, k = 8>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
      %one = llvm.mlir.constant(1 : i32) : i32
      %h = llvm.extractelement %a[%one : i32] : vector<2xf16>
      nvvm.cp.async.shared.global %p, %g, 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
      nvvm.cp.async.shared.global %p, %g, 8, cache = ca, %i : !llvm.ptr<3>, !llvm.ptr<1>, i32
      nvvm.cp.async.commit.group
      nvvm.cp.async.wait.group 1
      llvm.return
    }
  }
}
"""

POINTERS = """
func.func @f(%s: memref<16x16xf16, 3>, %g: memref<8xf32>, %i: index) {
  %p = affinec.element_pointer %s[%i, %i] : memref<16x16xf16, 3> -> !llvm.ptr<3>
  %q = affinec.element_pointer %g[%i] : memref<8xf32> -> !llvm.ptr<1>
  func.return
}
"""


def _print(module, generic: bool = False) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue()


@pytest.mark.parametrize("text", [NVGPU_OPS, NVVM_OPS, POINTERS])
def test_every_op_round_trips_in_custom_and_generic_form(text):
    ctx = make_context()
    module = parse_module(ctx, text)
    verify(module)
    printed = _print(module)
    assert _print(parse_module(ctx, printed)) == printed
    generic = _print(module, generic=True)
    assert _print(parse_module(ctx, generic)) == printed


def test_the_custom_syntax_is_mlirs():
    printed = _print(parse_module(make_context(), NVGPU_OPS))
    assert "{numTiles = 4 : i32, transpose = false}" in printed
    assert "nvgpu.device_async_copy %g[%i, %i], %s[%i, %i], 8, %v {bypassL1}" in (
        printed
    )
    assert "!nvgpu.device.async.token" in _print(
        parse_module(make_context(), NVGPU_OPS), generic=True
    )


def test_builders_make_what_the_parser_makes():
    module = parse_module(make_context(), NVGPU_OPS)
    func = module.body.block.first_op
    assert func is not None
    args = func.body.block.args  # pyright: ignore[reportAttributeAccessIssue]
    s, i, a, b, c = args[1], args[3], args[5], args[6], args[9]
    ld = nvgpu.LdMatrixOp(s, [i, i], 4)
    ld.verify()
    assert str(ld.res.type) == "vector<4x2xf16>"
    mma = nvgpu.MmaSyncOp(a, b, c)
    mma.verify()
    assert mma.kind == nvgpu.MmaKind(16, 8, 16, "f16")
    assert mma.res.type == c.type


def _refused(body: str, message: str) -> None:
    text = (
        "func.func @f(%g: memref<64x64xf16>, %s: memref<16x40xf16, 3>, %i: index, "
        "%a: vector<4x2xf16>, %b: vector<2x2xf16>, %c: vector<2x2xf32>, "
        "%c16: vector<2x2xf16>, %af: vector<4x1xf32>, %bf: vector<2x1xf32>, "
        "%s32: memref<16x16xf32, 3>, %p: !llvm.ptr<3>, %q: !llvm.ptr<1>, %n: i32) {\n"
        f"{body}\n  func.return\n}}"
    )
    module = parse_module(make_context(), text, "input.mlir")
    with pytest.raises(VerificationError, match=message) as info:
        verify(module)
    located = format_exception(info.value)
    line = 2 + body.count("\n")  # the body's last op is the faulty one
    last = body.splitlines()[-1]  # located at its name, after its results
    column = 1 + re.match(r"\s*(%[\w:]+(, %[\w:]+)* = )?", last).end()
    assert located.startswith(f"input.mlir:{line}:{column}: error: "), located


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "%x = nvgpu.ldmatrix %g[%i, %i] {numTiles = 4 : i32, transpose = false} : "
            "memref<64x64xf16> -> vector<4x2xf16>",
            r"expected nvgpu.ldmatrix srcMemref must have a memory space attribute of "
            r"IntegerAttr\(3\)",
        ),
        (
            "%x = nvgpu.ldmatrix %s[%i, %i] {numTiles = 4 : i32, transpose = false} : "
            "memref<16x40xf16, 3> -> vector<2x2xf16>",
            "expected vector register shape\\[0\\] and numTiles to match",
        ),
        (
            "%x = nvgpu.ldmatrix %s[%i, %i] {numTiles = 3 : i32, transpose = false} : "
            "memref<16x40xf16, 3> -> vector<3x2xf16>",
            "numTiles must be 1, 2 or 4",
        ),
        (
            "%x = nvgpu.ldmatrix %s32[%i, %i] {numTiles = 1 : i32, transpose = false} "
            ": memref<16x16xf32, 3> -> vector<1x1xf32>",
            "ldmatrix loads 16-bit elements",
        ),
        (
            "%x = nvgpu.ldmatrix %s[%i] {numTiles = 1 : i32, transpose = false} : "
            "memref<16x40xf16, 3> -> vector<1x2xf16>",
            "expected 2 source indices",
        ),
        (
            "%d = nvgpu.mma.sync (%a, %a, %c) {mmaShape = [16, 8, 16]} : "
            "(vector<4x2xf16>, vector<4x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>",
            "expected 128 warp-wide matrix B elements",
        ),
        (
            "%d = nvgpu.mma.sync (%a, %b, %c16) {mmaShape = [16, 8, 16]} : "
            "(vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf16>) -> vector<2x2xf16>",
            r"takes C as vector<2x2xf32> per lane",
        ),
        (
            # MLIR's m16n8k8 f16, which affinec does not lower
            "%a8 = arith.constant dense<0.0> : vector<2x2xf16>\n"
            "  %b8 = arith.constant dense<0.0> : vector<1x2xf16>\n"
            "  %d = nvgpu.mma.sync (%a8, %b8, %c) {mmaShape = [16, 8, 8]} : "
            "(vector<2x2xf16>, vector<1x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>",
            r"unsupported mma.sync: shape \[16, 8, 8\] with f16 operands",
        ),
        (
            "%d = nvgpu.mma.sync (%af, %bf, %c) {mmaShape = [16, 8, 8]} : "
            "(vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>",
            "f32 operands need tf32 tensor cores",
        ),
        (
            "%d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16], tf32Enabled} : "
            "(vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>",
            "expected tf32 tensor cores only for F32 operands",
        ),
        (
            "%t = nvgpu.device_async_copy %g[%i, %i], %s[%i, %i], 3 : "
            "memref<64x64xf16> to memref<16x40xf16, 3>",
            r"Requested copy elements is 3 with width 16\. But copy elements could be "
            r"one of 2, 4, 8\.",
        ),
        (
            "%t = nvgpu.device_async_copy %g[%i, %i], %s[%i, %i], 4 {bypassL1} : "
            "memref<64x64xf16> to memref<16x40xf16, 3>",
            r"bypassL1 does not satify alignment for 'memref<16x40xf16, 3>' with "
            r"destination element 4\. Unset bypassL1, or set destination element to 8",
        ),
        (
            "%t = nvgpu.device_async_copy %s[%i, %i], %g[%i, %i], 8 : "
            "memref<16x40xf16, 3> to memref<64x64xf16>",
            r"destination memref must have a memory space attribute of IntegerAttr\(3\)",
        ),
        (
            "%t = nvgpu.device_async_copy %g[%i, %i], %s32[%i, %i], 4 : "
            "memref<64x64xf16> to memref<16x16xf32, 3>",
            "source and destination must have the same element type",
        ),
        (
            "%t = nvgpu.device_async_copy %g[%i, %i], %s[%i, %i], 8 : "
            "memref<64x64xf16> to memref<16x40xf16, 3>\n"
            "  nvgpu.device_async_wait %t {numGroups = 9 : i32}",
            "numGroups must be between 0 and 7",
        ),
        (
            "nvvm.cp.async.shared.global %p, %q, 8, cache = cg : !llvm.ptr<3>, "
            "!llvm.ptr<1>",
            "cache = cg copies 16 bytes only",
        ),
        (
            "%r = nvvm.ldmatrix %p {num = 4 : i32, layout = #nvvm.mma_layout<row>} : "
            "(!llvm.ptr<3>) -> !llvm.struct<(i32, i32)>",
            r"4 tiles give !llvm.struct<\(i32, i32, i32, i32\)>",
        ),
        (
            "%x = arith.constant 0.0 : f32\n"
            "  %d = nvvm.mma.sync A[%n, %n, %n, %n] B[%n, %n] C[%x, %x, %x, %x] "
            "{layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, "
            "shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> "
            "!llvm.struct<(f32, f32, f32, f32)>",
            r"m16n8k16 f16 takes A as 4 x vector<2xf16>",
        ),
        (
            "%e = affinec.element_pointer %s[%i, %i] : memref<16x40xf16, 3> -> "
            "!llvm.ptr<1>",
            r"the elements of memref<16x40xf16, 3 : i64> are at !llvm.ptr<3>",
        ),
    ],
)
def test_malformed_ops_are_refused_at_their_line(body, message):
    _refused("  " + body, message)
