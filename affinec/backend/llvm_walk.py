"""The walk over a module at the llvm + nvvm level that builds the llvmlite module
of its kernels (`llvm_module`): the `gpu.module`s' globals, keeping their
alignment (shared memory `undef`-initialized, its only legal initializer), then
every function declared, then every body defined, block by block, each op through
instruction selection (`affinec.backend.llvm_instructions`) and each run of
`nvvm.wgmma.mma_async` accumulating into one accumulator as one inline PTX
statement; after a `wgmma.wait_group 0` of its own, the accumulators tied to it
(`affinec.backend.wgmma_fences`).

Kernels (`nvvm.kernel`) get the `ptx_kernel` calling convention and their
`nvvm.maxntid` and `nvvm.minctasm` `nvvm.annotations` entries; arguments keep
`llvm.noalias` (as `noalias`), `llvm.align`, by-value parameters (`llvm.byval`) and
grid constants (an `nvvm.annotations` entry, which llvmlite's attributes lack).
"""

from __future__ import annotations

import llvmlite.ir as ir
from xdsl.backend.llvm.convert_op import create_constant
from xdsl.backend.llvm.convert_type import convert_type
from xdsl.dialects import llvm
from xdsl.dialects.builtin import DenseArrayBase, DictionaryAttr, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

import affinec.backend.llvm_bfloat  # noqa: F401 (registers bf16 for convert_type)
from affinec.backend.emitter_errors import EmitterError, emitting
from affinec.backend.llvm_instructions import convert, inline_ptx
from affinec.backend.nvptx import TRIPLE
from affinec.backend.wgmma_fences import (
    accumulator_allocas,
    completes_accumulators,
    fence_accumulators,
)
from affinec.dialects import gpu, nvvm
from affinec.dialects.nvvm import BYVAL, GRID_CONSTANT, KERNEL, MAXNTID, MINCTASM


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
            with emitting(op):
                _global(op, out)
    functions = [op for op in ops if isinstance(op, llvm.FuncOp)]
    for f in functions:
        with emitting(f):
            _declare(f, out)
    for f in functions:
        if f.body.blocks:
            _define(f, out)
    return out


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
    accumulators = accumulator_allocas(op)
    for block in op.body.blocks:
        builder = ir.IRBuilder(blocks[block])
        builder.position_at_end(blocks[block])
        written: set[Operation] = set()  # the later wgmmas of a run
        for inner in block.ops:
            if inner in written:
                continue
            with emitting(inner):
                if isinstance(inner, nvvm.WgmmaMmaAsyncOp):
                    run = nvvm.accumulation_run(inner)
                    statement = nvvm.accumulation_ptx(run)
                    operands = nvvm.accumulation_operands(run)
                    inline_ptx(statement, operands, run[-1].res, builder, values)
                    written.update(run[1:])
                else:
                    convert(inner, builder, values, blocks)
                    if accumulators and completes_accumulators(inner):
                        fence_accumulators(accumulators, builder, values)


__all__ = ["device_modules", "llvm_module"]
