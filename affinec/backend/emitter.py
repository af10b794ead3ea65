"""From the llvm + nvvm level to LLVM IR text and to PTX.

LLVM IR comes from xDSL's llvm backend (`xdsl.backend.llvm.convert_op`) for every op it
handles right. This module walks the module and the functions itself, to fix what that
backend gets wrong for GPU code: it emits a GEP on a pointer outside address space 0
as a cast to a typed pointer in address space 0 (invalid), drops the alignment of
globals and knows no kernels. So here: GEPs are built directly on opaque pointers of
any address space, globals keep their alignment, kernels (`nvvm.kernel`) get the
`ptx_kernel` calling convention and their `nvvm.maxntid` and `nvvm.minctasm`
`nvvm.annotations` entries, `llvm.noalias` arguments the `noalias` attribute, each
`nvvm` op becomes a call of its intrinsic (`op.intrinsic()`, with the operands and then
`op.immediates()` as i32 constants; an `nvvm.mma.sync` or `nvvm.ldmatrix` returns a
struct, read with `llvm.extractvalue`), and the ops xDSL's backend lacks
(`llvm.extractelement`, `llvm.addrspacecast`, `llvm.uitofp`, `llvm.fptosi`,
`llvm.fptoui`) their instructions, and MLIR's intrinsic ops (`llvm.intr.maximum`,
`minimum`, `maxnum`, `minnum`, `fma`, `smax`, `smin`, `umax`, `umin`) calls of their
intrinsics. Vectors such as `<2 x half>` and their `bitcast`
to i32 go through xDSL's backend as they are. Neither llvmlite nor xDSL's backend
knows LLVM's `bfloat`: `BFloatType` is it, and this module registers it for xDSL's
`bf16`.

PTX comes from llvmlite's NVPTX target: the module is optimized at `-O3` and compiled
for `sm_80` (default) or `sm_90` with PTX ISA 8.0 (`+ptx80`), a version CUDA 13.0's
driver and ptxas accept; `to_ptx` checks the `.version` it got. With
`AFFINEC_FAST_CODEGEN=1` in the environment, NVPTX's code generation skips its
straight-line strength reduction (see `FAST_CODEGEN`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

import llvmlite.binding as llvm_binding
import llvmlite.ir as ir
import numpy as np
from llvmlite.ir.types import _BaseFloatType
from xdsl.backend.llvm import convert_type as xdsl_convert_type
from xdsl.backend.llvm.convert_op import convert_op, create_constant
from xdsl.backend.llvm.convert_type import convert_type
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    ModuleOp,
    VectorType,
)
from xdsl.ir import Block, Operation, SSAValue

from affinec.base.diagnostics import OpError, is_user_error, raised_by, xdsl_failure
from affinec.base.element_types import intrinsic_suffix
from affinec.dialects import gpu, nvvm
from affinec.dialects import llvm as llvm_extensions
from affinec.dialects.affinec import UNROLL
from affinec.dialects.nvvm import BYVAL, GRID_CONSTANT, KERNEL, MAXNTID, MINCTASM
from affinec.hardware.chips import ARCHS, DEFAULT_ARCH, chip

TRIPLE = "nvptx64-nvidia-cuda"
PTX_FEATURES = "+ptx80"
"""PTX ISA 8.0: new enough for sm_90, old enough for CUDA 13.0's driver and ptxas."""
MAX_PTX_MAJOR = 8

FAST_CODEGEN = "AFFINEC_FAST_CODEGEN"
"""The environment variable that, set to 1 before the first compilation of a process,
makes NVPTX's code generation skip straight-line strength reduction: on the unrolled
tensor-core kernels that pass takes 0.17-0.25 s of a 0.3 s code generation (its cost
grows with the unrolled loop body), and without it the PTX differs (1-7 % more SASS
instructions, ptxas 13.0). Off by default: what it costs the kernels is for a GPU run
to measure (`scripts/gpu_session.sh codegen`)."""


class EmitterError(OpError):
    """The module cannot be emitted; `op` (when set) is the op at fault."""


class BFloatType(_BaseFloatType):
    """LLVM's `bfloat`, which llvmlite lacks (constants are written `0xR` and the
    16 bits)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"

    def format_constant(self, value) -> str:
        from affinec.base.dtypes import round_to_bfloat16

        # Rounded once, as the interpreter rounds a float64 to bf16.
        bits = int(np.asarray(round_to_bfloat16(value)).view(np.uint16))
        return f"0xR{bits:04X}"


BFloatType._create_instance()
# xDSL 0.74's LLVM backend has no converter for bf16: register ours.
xdsl_convert_type._TYPE_CONVERTERS.setdefault(  # pyright: ignore[reportPrivateUsage]
    BFloat16Type, lambda _: BFloatType()
)


@dataclass(frozen=True)
class Emitted:
    """The PTX of a module, and the LLVM IR it was compiled from."""

    ptx: str
    llvm_ir: str
    """The unoptimized LLVM IR, as `to_llvm_ir` gives it."""
    arch: str


# --------------------------------------------------------------------------------------
# LLVM IR
# --------------------------------------------------------------------------------------


def device_modules(module: ModuleOp) -> list[gpu.ModuleOp]:
    """The `gpu.module`s of `module`, checked to be at the llvm level."""
    found = [op for op in module.body.block.ops if isinstance(op, gpu.ModuleOp)]
    if not found:
        raise EmitterError(
            module,
            "the module has no gpu.module: map it to the GPU and lower it first "
            "(the default pipeline does)",
        )
    for m in found:
        for op in m.body.block.ops:
            if not isinstance(op, llvm.FuncOp | llvm.GlobalOp):
                raise EmitterError(
                    op,
                    f"'{op.name}' is not at the llvm level: lower the module first "
                    "(convert-gpu-to-nvvm)",
                )
    return found


def llvm_module(module: ModuleOp) -> ir.Module:
    """The llvmlite module of every kernel in `module` (at the llvm + nvvm level)."""
    out = ir.Module(name="affinec")
    out.triple = TRIPLE
    ops = [op for m in device_modules(module) for op in m.body.block.ops]
    for op in ops:
        if isinstance(op, llvm.GlobalOp):
            with _at(op):
                _global(op, out)
    functions = [op for op in ops if isinstance(op, llvm.FuncOp)]
    for f in functions:
        with _at(f):
            _declare(f, out)
    for f in functions:
        if f.body.blocks:
            _define(f, out)
    return out


@contextmanager
def _at(op: Operation) -> Iterator[None]:
    """Emit `op`: what xDSL's backend or llvmlite raise on it (a type they cannot
    translate, an op they do not know, operands of the wrong types) is an
    `EmitterError` at `op`."""
    try:
        yield
    except EmitterError:
        raise
    except Exception as e:
        if not (is_user_error(e) or raised_by(e, "llvmlite")):
            raise
        raise EmitterError(op, f"cannot emit it as LLVM IR: {xdsl_failure(e)}") from e


def to_llvm_ir(module: ModuleOp, arch: str = DEFAULT_ARCH) -> str:
    """The LLVM IR text of the module's kernels, with the NVPTX data layout."""
    _check_features(module, _checked_arch(arch))
    m = llvm_module(module)
    m.data_layout = str(_target_machine(_checked_arch(arch)).target_data)
    return _loop_metadata(str(m))


def _global(op: llvm.GlobalOp, out: ir.Module) -> None:
    t = convert_type(op.global_type)
    g = ir.GlobalVariable(out, t, op.sym_name.data, addrspace=op.addr_space.value.data)
    g.linkage = op.linkage.linkage.data
    if op.value is not None:
        g.initializer = create_constant(op.global_type, op.value)
    elif g.linkage == "internal":
        # Shared memory cannot be initialized: `undef` is the only legal initializer.
        g.initializer = ir.Constant(t, ir.Undefined)
    if op.alignment is not None:
        g.align = op.alignment.value.data
    if op.constant is not None:
        g.global_constant = True


def _declare(op: llvm.FuncOp, out: ir.Module) -> None:
    output = op.function_type.output
    attrs = [
        a.data if isinstance(a, DictionaryAttr) else {}
        for a in (op.arg_attrs or [DictionaryAttr({})] * len(op.function_type.inputs))
    ]
    inputs = [
        _by_value(a) if BYVAL in a else convert_type(t)
        for t, a in zip(op.function_type.inputs, attrs, strict=True)
    ]
    fnty = ir.FunctionType(convert_type(output), inputs)
    fn = ir.Function(out, fnty, op.sym_name.data)
    fn.linkage = op.linkage.linkage.data if op.body.blocks else "external"
    for k, (arg, a) in enumerate(zip(fn.args, attrs, strict=True)):
        if "llvm.noalias" in a:
            arg.add_attribute("noalias")
        if BYVAL in a:
            arg.add_attribute("byval")
        if isinstance(align := a.get("llvm.align"), IntegerAttr):
            arg.attributes.align = align.value.data
        if GRID_CONSTANT in a:
            # the annotation form: llvmlite knows no `nvvm.grid_constant` attribute
            out.add_named_metadata(
                "nvvm.annotations",
                [
                    fn,
                    ir.MetaDataString(out, "grid_constant"),
                    out.add_metadata([ir.Constant(ir.IntType(32), k + 1)]),
                ],
            )
    if KERNEL in op.attributes:
        fn.calling_convention = "ptx_kernel"
        maxntid = op.attributes.get(MAXNTID)
        if isinstance(maxntid, DenseArrayBase):
            for axis, n in zip("xyz", maxntid.get_values(), strict=False):
                out.add_named_metadata(
                    "nvvm.annotations",
                    [
                        fn,
                        ir.MetaDataString(out, f"maxntid{axis}"),
                        ir.Constant(ir.IntType(32), n),
                    ],
                )
        minctasm = op.attributes.get(MINCTASM)
        if isinstance(minctasm, IntegerAttr):
            out.add_named_metadata(
                "nvvm.annotations",
                [
                    fn,
                    ir.MetaDataString(out, "minctasm"),
                    ir.Constant(ir.IntType(32), minctasm.value.data),
                ],
            )


def _by_value(attrs: dict) -> ir.Type:
    """The pointer type of a by-value parameter (`llvm.byval = T`): llvmlite prints
    `byval(T)` from the pointer's pointee, so the pointer is typed."""
    return ir.PointerType(convert_type(attrs[BYVAL]))


def _define(op: llvm.FuncOp, out: ir.Module) -> None:
    fn = out.get_global(op.sym_name.data)
    assert isinstance(fn, ir.Function)
    blocks: dict[Block, ir.Block] = {}
    values: dict[SSAValue, ir.Value] = {}
    for k, block in enumerate(op.body.blocks):
        blocks[block] = fn.append_basic_block(name="entry" if k == 0 else f"bb{k}")
    for arg, value in zip(op.body.blocks[0].args, fn.args, strict=True):
        values[arg] = value
        if arg.name_hint:
            value.name = arg.name_hint
    for block in list(op.body.blocks)[1:]:
        builder = ir.IRBuilder(blocks[block])
        for arg in block.args:
            values[arg] = builder.phi(convert_type(arg.type), name=arg.name_hint or "")
    for block in op.body.blocks:
        builder = ir.IRBuilder(blocks[block])
        builder.position_at_end(blocks[block])
        written: set[Operation] = set()  # the later wgmmas of a run
        for inner in block.ops:
            if inner in written:
                continue
            with _at(inner):
                if isinstance(inner, nvvm.WgmmaMmaAsyncOp):
                    run = nvvm.accumulation_run(inner)
                    statement = nvvm.accumulation_ptx(run)
                    operands = nvvm.accumulation_operands(run)
                    _inline_ptx(statement, operands, run[-1].res, builder, values)
                    written.update(run[1:])
                else:
                    _convert(inner, builder, values, blocks)


_INT_FLOAT_CASTS: dict[type[Operation], str] = {
    llvm_extensions.UIToFPOp: "uitofp",
    llvm_extensions.FPToSIOp: "fptosi",
    llvm_extensions.FPToUIOp: "fptoui",
}
"""The casts of affinec's llvm dialect that xDSL's backend does not know, by
llvmlite's builder method."""


def _convert(
    op: Operation,
    builder: ir.IRBuilder,
    values: dict[SSAValue, ir.Value],
    blocks: dict[Block, ir.Block],
) -> None:
    if isinstance(op, llvm.GEPOp):
        indices = iter(op.ssa_indices)
        index_values = [
            values[next(indices)]
            if i == llvm.GEP_USE_SSA_VAL
            else ir.Constant(ir.IntType(32), i)
            for i in op.rawConstantIndices.iter_values()
        ]
        base = values[op.ptr]
        element = convert_type(op.elem_type)
        inbounds = llvm_extensions.is_inbounds(op)
        if getattr(base.type, "is_opaque", True):
            values[op.result] = builder.gep(
                base, index_values, inbounds=inbounds, source_etype=element
            )
        else:
            # llvmlite types globals and allocas (a pointer to the array or to the
            # element) and then computes the result's type itself.
            pointee = base.type.pointee
            if isinstance(pointee, ir.ArrayType) and pointee.element == element:
                index_values = [ir.Constant(index_values[0].type, 0), *index_values]
            elif pointee != element:
                # Dynamic shared memory (`[0 x i8]`) addressed in a buffer's type.
                base = builder.bitcast(base, element.as_pointer(base.type.addrspace))
            values[op.result] = builder.gep(base, index_values, inbounds=inbounds)
    elif isinstance(op, llvm.LoadOp | llvm.StoreOp) and _retyped(op, values):
        _vector_access(op, builder, values)
    elif isinstance(op, nvvm.IntrinsicOp):
        _intrinsic_call(op, builder, values)
    elif isinstance(op, nvvm.PtxOp):
        result = op.results[0] if op.results else None
        _inline_ptx(op.ptx(), op.operands, result, builder, values)
    elif isinstance(op, llvm_extensions.ExtractElementOp):
        values[op.res] = builder.extract_element(values[op.vector], values[op.position])
    elif isinstance(op, llvm_extensions.AddrSpaceCastOp):
        values[op.res] = builder.addrspacecast(
            values[op.arg], convert_type(op.res.type)
        )
    elif isinstance(op, llvm_extensions.PoisonOp):
        # undef refines poison: LLVM may read either as any value
        values[op.res] = ir.Constant(convert_type(op.res.type), ir.Undefined)
    elif type(op) in llvm_extensions.INTRINSIC_NAMES:
        t = op.results[0].type
        name = f"{llvm_extensions.INTRINSIC_NAMES[type(op)]}.{intrinsic_suffix(t)}"
        args = [values[v] for v in op.operands]
        values[op.results[0]] = _call_intrinsic(builder, name, convert_type(t), args)
    elif type(op) in _INT_FLOAT_CASTS:
        cast = getattr(builder, _INT_FLOAT_CASTS[type(op)])
        values[op.results[0]] = cast(
            values[op.operands[0]], convert_type(op.results[0].type)
        )
    else:
        convert_op(op, builder, values, blocks)
        if isinstance(op, llvm.BrOp) and UNROLL in op.attributes:
            _mark_unroll(builder.block.terminator, builder.module)
    for result in op.results:
        value = values.get(result)
        if result.name_hint and isinstance(value, ir.Instruction) and not value.name:
            value.name = result.name_hint


def _retyped(op: llvm.LoadOp | llvm.StoreOp, values: dict[SSAValue, ir.Value]) -> bool:
    """A load or store of a vector through a typed pointer (shared memory's, from
    llvmlite's typed globals) to its elements."""
    t = op.dereferenced_value.type if isinstance(op, llvm.LoadOp) else op.value.type
    pointer = values[op.ptr].type
    return (
        isinstance(t, VectorType)
        and not getattr(pointer, "is_opaque", True)
        and pointer.pointee != convert_type(t)
    )


def _vector_access(
    op: llvm.LoadOp | llvm.StoreOp,
    builder: ir.IRBuilder,
    values: dict[SSAValue, ir.Value],
) -> None:
    """The access through the pointer cast to the vector's type."""
    t = op.dereferenced_value.type if isinstance(op, llvm.LoadOp) else op.value.type
    base = values[op.ptr]
    pointer = builder.bitcast(base, convert_type(t).as_pointer(base.type.addrspace))
    if isinstance(op, llvm.LoadOp):
        access = builder.load(pointer)
        values[op.dereferenced_value] = access
    else:
        access = builder.store(values[op.value], pointer)
    if op.alignment:
        access.align = op.alignment.value.data


def _mark_unroll(branch: ir.Instruction | None, module: ir.Module) -> None:
    """Attach a placeholder loop id to a back edge; `_loop_metadata` completes it."""
    if branch is None:
        return
    count = getattr(module, "_affinec_loops", 0)
    module._affinec_loops = count + 1  # pyright: ignore[reportAttributeAccessIssue]
    placeholder = module.add_metadata(
        [ir.MetaDataString(module, f"{_LOOP_MARK}{count}")]
    )
    branch.set_metadata("llvm.loop", placeholder)


_LOOP_MARK = "affinec.loop."
_PLACEHOLDER = re.compile(
    r'^(!\d+) = !\{\s*!"' + re.escape(_LOOP_MARK) + r'\d+"\s*\}$', re.MULTILINE
)


def _loop_metadata(text: str) -> str:
    """Turn the loop id placeholders into what LLVM wants: a distinct node whose first
    operand is itself (llvmlite cannot build self-references), asking for a full
    unroll."""
    if not _PLACEHOLDER.search(text):
        return text
    ids = re.findall(r"^!(\d+) =", text, re.MULTILINE)
    unroll = f"!{1 + max(int(n) for n in ids)}"
    text = _PLACEHOLDER.sub(lambda m: f"{m[1]} = distinct !{{{m[1]}, {unroll}}}", text)
    return text + f'\n{unroll} = !{{!"llvm.loop.unroll.full"}}\n'


def _intrinsic_call(
    op: nvvm.IntrinsicOp,
    builder: ir.IRBuilder,
    values: dict[SSAValue, ir.Value],
) -> None:
    args: Sequence[ir.Value] = [values[v] for v in op.call_operands()] + [
        ir.Constant(ir.IntType(32), a)
        if isinstance(a, int)
        else ir.Constant(ir.IntType(a[0]), a[1])
        for a in op.immediates()
    ]
    if op.results:
        result_type = convert_type(op.results[0].type)
    elif op.RESULT is not None:
        result_type = convert_type(op.RESULT)
    else:
        result_type = ir.VoidType()
    call = _call_intrinsic(builder, op.intrinsic(), result_type, args)
    if op.results:
        values[op.results[0]] = call


def _call_intrinsic(
    builder: ir.IRBuilder, name: str, result: ir.Type, args: Sequence[ir.Value]
) -> ir.Instruction:
    """A call of the intrinsic `name`, declared in the module on its first call."""
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(
            builder.module, ir.FunctionType(result, [a.type for a in args]), name
        )
    return builder.call(fn, args)


def _inline_ptx(
    statement: tuple[str, str],
    operands: Sequence[SSAValue],
    result: SSAValue | None,
    builder: ir.IRBuilder,
    values: dict[SSAValue, ir.Value],
) -> None:
    """An inline PTX statement (assembly, constraints) on `operands`, its outputs
    `result`'s (a struct of them, or none)."""
    asm, constraints = statement
    args = []
    for v in operands:  # a struct passes its members (an accumulator's registers)
        value = values[v]
        if isinstance(value.type, ir.LiteralStructType):
            args += [
                builder.extract_value(value, k) for k in range(len(value.type.elements))
            ]
        else:
            args.append(value)
    result_type = convert_type(result.type) if result else ir.VoidType()
    call = builder.asm(
        ir.FunctionType(result_type, [a.type for a in args]),
        asm,
        constraints,
        args,
        side_effect=True,
    )
    if result:
        values[result] = call


# --------------------------------------------------------------------------------------
# PTX
# --------------------------------------------------------------------------------------


def _check_features(module: ModuleOp, arch: str) -> None:
    """Refuse an instruction `arch` lacks, at its op, before LLVM sees it (LLVM
    stops the whole process on an intrinsic its target cannot select)."""
    target = chip(arch)
    for op in module.walk():
        feature = nvvm.required_feature(op)
        if feature is not None and not target.has(feature):
            needs = "sm_90a" if feature == "wgmma" else "sm_90 or sm_90a"
            raise EmitterError(
                op, f"needs {needs} ({feature}); the PTX is being made for {arch}"
            )


def _checked_arch(arch: str) -> str:
    if arch not in ARCHS:
        raise EmitterError(
            None,
            f"unknown GPU architecture '{arch}' (expected one of {', '.join(ARCHS)})",
        )
    return arch


@cache
def _codegen_options() -> bool:
    """Pass `FAST_CODEGEN`'s choice to LLVM, once; whether it skips the pass. LLVM's
    pass gate is process-wide and read when a context first runs a pass, which is
    why each module is parsed into a context of its own."""
    fast = os.environ.get(FAST_CODEGEN, "") == "1"
    if fast:
        llvm_binding.set_option("affinec", "-opt-disable=slsr")
    return fast


@cache
def _target_machine(arch: str, opt_level: int = 3) -> llvm_binding.TargetMachine:
    _codegen_options()
    llvm_binding.initialize_all_targets()
    llvm_binding.initialize_all_asmprinters()
    target = llvm_binding.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, features=PTX_FEATURES, opt=opt_level)


def llvm_ir_to_ptx(text: str, arch: str = DEFAULT_ARCH, opt_level: int = 3) -> str:
    """Optimize LLVM IR text at `opt_level` and compile it to PTX for `arch`."""
    if opt_level not in (0, 1, 2, 3):
        raise EmitterError(None, f"opt-level must be 0, 1, 2 or 3, got {opt_level!r}")
    tm = _target_machine(_checked_arch(arch), opt_level)
    # The module's own context (see `_codegen_options`), disposed right after the
    # module: left to the garbage collector, the two may go in either order, and a
    # module disposed after its context crashes LLVM.
    context = llvm_binding.create_context()
    try:
        parsed = llvm_binding.parse_assembly(text, context)
    except RuntimeError as e:
        context.close()
        raise EmitterError(None, f"LLVM rejected the IR: {e}") from None
    try:
        try:
            parsed.verify()
        except RuntimeError as e:
            raise EmitterError(None, f"LLVM rejected the IR: {e}") from None
        parsed.triple = TRIPLE
        parsed.data_layout = str(tm.target_data)
        if opt_level:
            pto = llvm_binding.create_pipeline_tuning_options(opt_level)
            pb = llvm_binding.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(parsed, pb)
        ptx = tm.emit_assembly(parsed)
    finally:
        parsed.close()
        context.close()
    check_ptx_version(ptx)
    return ptx


def check_ptx_version(ptx: str) -> tuple[int, int]:
    """The PTX ISA version of `ptx`; an `EmitterError` above 8.x (CUDA 13.0's limit)."""
    match = re.search(r"^\s*\.version\s+(\d+)\.(\d+)", ptx, re.MULTILINE)
    if match is None:
        raise EmitterError(None, "the PTX has no .version directive")
    version = (int(match[1]), int(match[2]))
    if version[0] > MAX_PTX_MAJOR:
        raise EmitterError(
            None,
            f"PTX ISA {version[0]}.{version[1]} is newer than the drivers accept "
            f"(at most {MAX_PTX_MAJOR}.x)",
        )
    return version


def emit(module: ModuleOp, arch: str = DEFAULT_ARCH, opt_level: int = 3) -> Emitted:
    """The LLVM IR and PTX of the module's kernels."""
    text = to_llvm_ir(module, arch)
    return Emitted(llvm_ir_to_ptx(text, arch, opt_level), text, arch)


def to_ptx(module: ModuleOp, arch: str = DEFAULT_ARCH, opt_level: int = 3) -> str:
    """The PTX of the module's kernels (the module must be at the llvm + nvvm level)."""
    return emit(module, arch, opt_level).ptx


__all__ = [
    "Emitted",
    "EmitterError",
    "check_ptx_version",
    "emit",
    "llvm_ir_to_ptx",
    "llvm_module",
    "to_llvm_ir",
    "to_ptx",
]
