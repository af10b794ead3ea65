"""Instruction selection: one op of the llvm + nvvm level as LLVM instructions
(`convert`), where xDSL's LLVM backend (`xdsl.backend.llvm.convert_op`) gets it
wrong for GPU code or does not know it, and through that backend otherwise.

GEPs are built directly on opaque pointers of any address space (xDSL's backend
casts a pointer outside address space 0 to a typed pointer in address space 0,
which is invalid); a vector load or store through a typed pointer (llvmlite's
shared-memory globals) goes through the pointer cast to the vector's type; each
`nvvm` op becomes a call of its intrinsic (`op.intrinsic()`, with the operands and
then `op.immediates()` as i32 constants; an `nvvm.mma.sync` or `nvvm.ldmatrix`
returns a struct, read with `llvm.extractvalue`) or its inline PTX (`inline_ptx`);
the ops xDSL's backend lacks (`llvm.extractelement`, `llvm.addrspacecast`,
`llvm.uitofp`, `llvm.fptosi`, `llvm.fptoui`, poison) become their instructions, and
MLIR's intrinsic ops (`llvm.intr.maximum`, `minimum`, `maxnum`, `minnum`, `fma`,
`smax`, `smin`, `umax`, `umin`) calls of their intrinsics. A back edge marked for
unrolling gets its loop metadata (`affinec.backend.loop_metadata`).
"""

from __future__ import annotations

from collections.abc import Sequence

import llvmlite.ir as ir
from xdsl.backend.llvm.convert_op import convert_op
from xdsl.backend.llvm.convert_type import convert_type
from xdsl.dialects import llvm
from xdsl.dialects.builtin import VectorType
from xdsl.ir import Block, Operation, SSAValue

import affinec.backend.llvm_bfloat  # noqa: F401 (registers bf16 for convert_type)
from affinec.backend.loop_metadata import mark_unroll
from affinec.base.element_types import intrinsic_suffix
from affinec.dialects import llvm as llvm_extensions
from affinec.dialects import nvvm
from affinec.dialects.affinec import UNROLL

_INT_FLOAT_CASTS: dict[type[Operation], str] = {
    llvm_extensions.UIToFPOp: "uitofp",
    llvm_extensions.FPToSIOp: "fptosi",
    llvm_extensions.FPToUIOp: "fptoui",
}
"""The casts of affinec's llvm dialect that xDSL's backend does not know, by
llvmlite's builder method."""


def convert(
    op: Operation,
    builder: ir.IRBuilder,
    values: dict[SSAValue, ir.Value],
    blocks: dict[Block, ir.Block],
) -> None:
    """Emit `op` with `builder`: its result(s) into `values` (the LLVM value of
    each SSA value emitted so far), branches to `blocks`."""
    route = _ROUTES.get(type(op))
    if route is None:
        route = _ROUTES[type(op)] = _route(type(op))
    if route == _GEP:
        assert isinstance(op, llvm.GEPOp)
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
    elif route == _ACCESS and _retyped(op, values):  # pyright: ignore[reportArgumentType]
        _vector_access(op, builder, values)  # pyright: ignore[reportArgumentType]
    elif route == _INTRINSIC:
        _intrinsic_call(op, builder, values)  # pyright: ignore[reportArgumentType]
    elif route == _PTX:
        assert isinstance(op, nvvm.PtxOp)
        result = op.results[0] if op.results else None
        inline_ptx(op.ptx(), op.operands, result, builder, values)
    elif route == _EXTRACT:
        assert isinstance(op, llvm_extensions.ExtractElementOp)
        values[op.res] = builder.extract_element(values[op.vector], values[op.position])
    elif route == _ADDRESS_SPACE_CAST:
        assert isinstance(op, llvm_extensions.AddrSpaceCastOp)
        values[op.res] = builder.addrspacecast(
            values[op.arg], convert_type(op.res.type)
        )
    elif route == _POISON:
        assert isinstance(op, llvm_extensions.PoisonOp)
        # undef refines poison: LLVM may read either as any value
        values[op.res] = ir.Constant(convert_type(op.res.type), ir.Undefined)
    elif route == _NAMED_INTRINSIC:
        t = op.results[0].type
        name = f"{llvm_extensions.INTRINSIC_NAMES[type(op)]}.{intrinsic_suffix(t)}"
        args = [values[v] for v in op.operands]
        values[op.results[0]] = _call_intrinsic(builder, name, convert_type(t), args)
    elif route == _INT_FLOAT_CAST:
        cast = getattr(builder, _INT_FLOAT_CASTS[type(op)])
        values[op.results[0]] = cast(
            values[op.operands[0]], convert_type(op.results[0].type)
        )
    else:
        convert_op(op, builder, values, blocks)
        if route == _BRANCH and UNROLL in op.attributes:
            mark_unroll(builder.block.terminator, builder.module)
    for result in op.results:
        value = values.get(result)
        if result.name_hint and isinstance(value, ir.Instruction) and not value.name:
            value.name = result.name_hint


(
    _GEP,
    _ACCESS,
    _INTRINSIC,
    _PTX,
    _EXTRACT,
    _ADDRESS_SPACE_CAST,
    _POISON,
    _NAMED_INTRINSIC,
    _INT_FLOAT_CAST,
    _BRANCH,
    _XDSL,
) = range(11)

_ROUTES: dict[type[Operation], int] = {}
"""How `convert` emits the ops of each class (`_route`), asked once a class: an
op's `isinstance` tests, one after another, cost more than its emission."""


def _route(cls: type[Operation]) -> int:
    """How `convert` emits an op of `cls`: its first case that takes the class (a
    load or store is retyped or not op by op; any other op goes to xDSL's backend,
    a branch then marked for unrolling where it asks)."""
    if issubclass(cls, llvm.GEPOp):
        return _GEP
    if issubclass(cls, llvm.LoadOp | llvm.StoreOp):
        return _ACCESS
    if issubclass(cls, nvvm.IntrinsicOp):
        return _INTRINSIC
    if issubclass(cls, nvvm.PtxOp):
        return _PTX
    if issubclass(cls, llvm_extensions.ExtractElementOp):
        return _EXTRACT
    if issubclass(cls, llvm_extensions.AddrSpaceCastOp):
        return _ADDRESS_SPACE_CAST
    if issubclass(cls, llvm_extensions.PoisonOp):
        return _POISON
    if cls in llvm_extensions.INTRINSIC_NAMES:
        return _NAMED_INTRINSIC
    if cls in _INT_FLOAT_CASTS:
        return _INT_FLOAT_CAST
    if issubclass(cls, llvm.BrOp):
        return _BRANCH
    return _XDSL


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


def inline_ptx(
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


__all__ = ["convert", "inline_ptx"]
